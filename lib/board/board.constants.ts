/** Injection token of the board's checked options (BoardSettings). */
export const BOARD_SETTINGS = 'REDIS_LOCK:BOARD_SETTINGS';
