// @leashd/leash: the TypeScript client of Leash (spec §13.6).
export { Leash, LeashAdmin, HeldLeaseHandle, OPERATIONS } from "./client.js";
export type { LeashOptions, CallOptions, OperationId } from "./client.js";
export { LeashError, LeaseDeniedError, LeaseLostError, isCode } from "./errors.js";
export type { ErrorCode } from "./errors.js";
export { rateLimit, withRateLimit, keyByIP, keyByHeader } from "./middleware.js";
export type { LimitOptions, NodeLikeRequest, NodeLikeResponse } from "./middleware.js";
export { FIELDS } from "./types.js";
export type * from "./types.js";
