import type { PublishCommand } from '../redis/redis-client';
import { arg } from './lua-script';

/** A caller's waiting state (see waiting-registration.lua). */
export type WaitingFlag = '0' | '1' | '-' | 'once';

/** Arguments several scripts of the catalog take: the publish command, a caller's waiting state. */
export const publish = arg<PublishCommand>();
export const waiting = arg<WaitingFlag>();
