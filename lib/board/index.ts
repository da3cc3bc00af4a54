// `nestjs-redis-lock/board`: a live page of the locks for a Nest application (issue 45), kept out of
// the main entry so applications that do not mount it never load it.
export { RedisLockBoardModule } from './redis-lock-board.module';
export { LockBoardOptionsError } from './lock-board-options-error';
export type { RedisLockBoardOptions, RedisLockBoardAsyncOptions, RedisLockBoardRuntimeOptions } from './board-options';
export type { BoardState } from './lock-board';
export type { BoardLock, BoardHolder, BoardWaiter, BoardKind } from './board-lock';
export type { BoardEvent, BoardEventType } from './event-log';
export type { LabelRow } from './label-stats';
