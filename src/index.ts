export { createLocks } from './locks.js';
export type { Locks } from './locks-api.js';
export type { FencedValue, HolderInfo } from './backend/backend.js';
export type { LockInfo } from './lock-info.js';
export type { Semaphore, SemaphoreOptions, PermitOptions } from './semaphore.js';
export type { ReadWriteLock, ReadWriteLockOptions } from './read-write-lock.js';
export type { FairLock, FairLockOptions } from './fair-lock.js';
export { MAX_PERMITS } from './semaphore.js';
export type { AcquireOptions, CloseOptions, LocksOptions, BackendOptions, RedisClientLike, IoredisClientLike, NodeRedisClientLike, GlideClientLike } from './options.js';
export type {
  ObservabilityOptions,
  Logger,
  LockHooks,
  LockKind,
  AcquireOutcome,
  LockEventBase,
  AcquiredEvent,
  AcquireFailedEvent,
  ReleasedEvent,
  LeaseEnd,
  LostEvent,
  RenewedEvent,
  RenewFailedEvent,
  QuorumFailedEvent,
  EvictionPolicyEvent,
} from './observe/types.js';
export { checkEvictionPolicy } from './backend/eviction-policy.js';
export type { EvictionPolicyReport } from './backend/eviction-policy.js';
export { Lease } from './lease/lease.js';
export { MultiLease } from './multi-lease.js';
export type { LeaseState } from './lease/lease-life.js';
export type { RenewOptions } from './lease/watchdog.js';
export type { WaitStrategyName } from './wait/strategy.js';
export { createMemoryStore, MemoryStore } from './backend/memory-store.js';
export {
  LockError,
  InvalidOptionError,
  LockTimeoutError,
  LockAbortedError,
  LeaseLostError,
  LeaseReleasedError,
  BackendError,
  UnreachableError,
  WrongTypeError,
  StaleFenceError,
  ClosedError,
  LockSuppressedError,
  QuorumError,
  ReplicationError,
  UnsupportedError,
  UpgradeDeadlockError,
} from './errors.js';
export type { NodeVote, QuorumOutcome } from './backend/quorum.js';
export type { LockErrorCode, LeaseLostReason } from './errors.js';
export { MAX_NAME_BYTES, MAX_TTL, MIN_TTL } from './validate.js';
