import type { Check } from "../check.js";
import { forgedAck, slowReader } from "./acks.js";
import { broadcastIdempotent } from "./broadcast.js";
import { historyMatchesDelivery } from "./history.js";
import { idempotentHttp, idempotentSocket } from "./idempotency.js";
import { messageSize } from "./limits.js";
import { lostEpoch, lostFutureSince, lostHistoryBound } from "./lost.js";
import { multiplexOrder } from "./multiplex.js";
import { concurrentPublishers } from "./order.js";
import { memberOnce, reloadIsNoLeave } from "./presence.js";
import { badBodies, badFrames, badRoom, badUpgrades, forbidden, publishKey, tokens } from "./refusals.js";
import { PUSHER_CHECKS } from "./pusher.js";
import { resumeAfterDrop } from "./resume.js";

/**
 * Every check, in the order of docs/guarantees.md's clauses. The slowest
 * (they wait for the service's own timeouts) come first, so they overlap
 * with the rest.
 */
export const CHECKS: readonly Check[] = [
  slowReader,
  memberOnce,
  reloadIsNoLeave,
  concurrentPublishers,
  historyMatchesDelivery,
  resumeAfterDrop,
  lostEpoch,
  lostFutureSince,
  lostHistoryBound,
  forgedAck,
  idempotentHttp,
  idempotentSocket,
  broadcastIdempotent,
  multiplexOrder,
  badRoom,
  badBodies,
  badUpgrades,
  publishKey,
  tokens,
  forbidden,
  badFrames,
  messageSize,
  ...PUSHER_CHECKS,
];
