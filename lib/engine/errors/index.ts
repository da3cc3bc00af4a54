export * from './lock-error';
export * from './lock-options-error';
export * from './lock-not-held-error';
export * from './lock-acquire-timeout-error';
export * from './lock-lost-error';
export * from './redis-unavailable-error';
export * from './lock-quorum-error';
