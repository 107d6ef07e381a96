import type { CustomClientFrame } from "../../protocol";
import type { PublishRefused } from "./publish-outcome";
import type { SocketState } from "./socket-state";

/** What beforePublish decided, checked: the JSON text to publish, or the refusal its publisher gets. */
export type PublishCheck = { ok: true; dataJson: string } | { ok: false; refusal: PublishRefused };

/** Where a publish is checked from, before it has a connection view. */
export type PublishOrigin = { kind: "socket"; socket: SocketState } | { kind: "http" } | { kind: "broadcast" } | { kind: "leaf" } | { kind: "multiplexed" } | { kind: "pusher"; event: string };

/**
 * What client frames meet of the application's hooks (a room's
 * beforePublish and onClientFrame: room/hook-runner.ts). An object that runs
 * no hooks (a leaf: its root checks publishes) uses NO_FRAME_HOOKS.
 */
export interface FrameHooks {
  readonly checksPublishes: boolean;
  readonly handlesClientFrames: boolean;
  /** Whether a socket's publishes and custom frames must pass the hooks one at a time, in arrival order. */
  readonly ordersFrames: boolean;
  checkPublish(dataJson: string, data: unknown, origin: PublishOrigin): Promise<PublishCheck>;
  /** Runs onClientFrame; false when it failed. */
  clientFrame(socket: SocketState, frame: CustomClientFrame): Promise<boolean>;
  /** Runs `task` after the socket's earlier tasks; null (nothing run) when too many are waiting. */
  inOrder(socket: SocketState, task: () => Promise<void>): Promise<void> | null;
}

export const NO_FRAME_HOOKS: FrameHooks = {
  checksPublishes: false,
  handlesClientFrames: false,
  ordersFrames: false,
  checkPublish: async (dataJson) => ({ ok: true, dataJson }),
  clientFrame: async () => false,
  inOrder: () => null,
};
