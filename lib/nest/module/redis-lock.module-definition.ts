import { ConfigurableModuleBuilder } from '@nestjs/common';
import { REDIS_LOCK_MODULE_OPTIONS } from '../redis-lock.constants';
import type { RedisLockModuleOptions } from './redis-lock-module.options';

export const { ConfigurableModuleClass, MODULE_OPTIONS_TOKEN, OPTIONS_TYPE, ASYNC_OPTIONS_TYPE } =
  new ConfigurableModuleBuilder<RedisLockModuleOptions>({
    moduleName: 'RedisLock',
    optionsInjectionToken: REDIS_LOCK_MODULE_OPTIONS,
  })
    .setClassMethodName('forRoot')
    .setFactoryMethodName('createRedisLockOptions')
    .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
    .build();

/** `RedisLockModule.forRoot()` argument: the module options plus `isGlobal` (default true). */
export type RedisLockModuleForRootOptions = typeof OPTIONS_TYPE;
/** `RedisLockModule.forRootAsync()` argument: `useFactory` + `inject`, `useClass` or `useExisting`, plus `imports` and `isGlobal`. */
export type RedisLockModuleAsyncOptions = typeof ASYNC_OPTIONS_TYPE;
