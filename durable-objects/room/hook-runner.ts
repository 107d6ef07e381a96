import { MAX_FRAMES_AWAITING_HOOKS } from "../../common/settings";
import type { CustomClientFrame } from "../../protocol";
import { logEvent } from "../../common/log";
import { utf8Length } from "../../common/utf8";
import type { LeaveCause } from "../engine/delivery";
import type { FrameHooks, PublishCheck, PublishOrigin } from "../engine/frame-hooks";
import type { PublishRefused } from "../engine/publish-outcome";
import type { SocketState } from "../engine/socket-state";
import { checkConnectionData } from "./connection-data";
import { RoomConnection, type ConnectionRoom } from "./connection";
import type {
  CloseInfo,
  Connection,
  ConnectDecision,
  ConnectRefusalCode,
  ConnectRequest,
  JsonObject,
  PublishDecision,
  PublishRefusalCode,
  PublishRequest,
  PublishSource,
} from "./hooks";

type Awaitable<T> = T | Promise<T>;

/** The hooks a room overrides, bound to it; a hook it does not override is absent (and costs nothing). */
export interface RoomHookSet<Data extends object = JsonObject> {
  onConnect?: (request: ConnectRequest) => Awaitable<ConnectDecision<Data>>;
  beforePublish?: (request: PublishRequest<Data>) => Awaitable<PublishDecision>;
  onClientFrame?: (connection: Connection<Data>, frame: CustomClientFrame) => Awaitable<void>;
  onClose?: (connection: Connection<Data>, info: CloseInfo) => Awaitable<void>;
}

export type HookName = keyof RoomHookSet;

/** What onConnect decided, checked. */
export type ConnectOutcome =
  | { ok: true; data: JsonObject | undefined; canPublish: boolean | undefined }
  | { ok: false; code: ConnectRefusalCode | "internal"; message: string };

export interface HookRunnerOptions {
  /** MAX_MESSAGE_BYTES: a transformed message must fit it too. */
  maxMessageBytes: number;
  /** Counts a refusal by reason (room counters: GET /rooms/{room}, /metrics). */
  count(reason: "connect_refused" | "publish_refused" | "hook_error"): void;
}

const CONNECT_CODES: ReadonlySet<string> = new Set<ConnectRefusalCode>(["forbidden", "unauthorized", "try_again_later"]);
const PUBLISH_CODES: ReadonlySet<string> = new Set<PublishRefusalCode>(["bad_request", "forbidden", "rate_limited"]);
/** A refusal's text is the application's; it is bounded like any other answer. */
const MAX_REFUSAL_CHARS = 500;

/** A hook broke its contract (threw, or answered something it may not): logged, answered as `internal`. */
class HookFailure extends Error {}

/** One socket's frames waiting for hooks, handled one at a time in arrival order. */
interface SocketQueue {
  tail: Promise<void>;
  waiting: number;
}

/**
 * Runs a room's hooks, so that nothing a hook does can break the room:
 *
 * - every call is contained: a throw, a rejected promise or an answer of the
 *   wrong shape becomes an `internal` refusal of that one request, logged as
 *   `hook_error` and counted, and the room goes on;
 * - answers are checked before the room acts on them: connection data must
 *   be a small JSON object, a transformed message must be JSON within
 *   MAX_MESSAGE_BYTES, refusal codes must be documented ones;
 * - a socket's publishes and custom frames go through its hooks one at a
 *   time, in the order they arrived (a hook that waits on I/O cannot reorder
 *   them), at most MAX_FRAMES_AWAITING_HOOKS waiting;
 * - `onClose` runs after the socket's waiting frames, never inside the
 *   delivery engine's loops (it is scheduled, not called, when a socket leaves).
 */
export class HookRunner<Data extends object = JsonObject> implements FrameHooks {
  readonly #hooks: RoomHookSet<Data>;
  readonly #room: ConnectionRoom;
  readonly #options: HookRunnerOptions;
  readonly #queues = new Map<SocketState, SocketQueue>();

  constructor(hooks: RoomHookSet<Data>, room: ConnectionRoom, options: HookRunnerOptions) {
    this.#hooks = hooks;
    this.#room = room;
    this.#options = options;
  }

  get checksPublishes(): boolean {
    return this.#hooks.beforePublish !== undefined;
  }

  get handlesClientFrames(): boolean {
    return this.#hooks.onClientFrame !== undefined;
  }

  /** Whether a socket's publishes must wait for the hooks' queue (any hook that sees frames is set). */
  get ordersFrames(): boolean {
    return this.#hooks.beforePublish !== undefined || this.#hooks.onClientFrame !== undefined;
  }

  get admitsSockets(): boolean {
    return this.#hooks.onConnect !== undefined;
  }

  get watchesCloses(): boolean {
    return this.#hooks.onClose !== undefined;
  }

  /** A view of one socket for a hook. */
  connection(socket: SocketState): RoomConnection<Data> {
    return new RoomConnection<Data>(socket, this.#room);
  }

  /** Runs onConnect (when overridden) and checks its answer. */
  async connect(request: ConnectRequest): Promise<ConnectOutcome> {
    const hook = this.#hooks.onConnect;
    if (!hook) return { ok: true, data: undefined, canPublish: undefined };
    try {
      const decision: unknown = await hook(request);
      if (decision === undefined || decision === null) return { ok: true, data: undefined, canPublish: undefined };
      if (typeof decision !== "object") throw new HookFailure("onConnect must return nothing, { data, canPublish } or { refuse, code }");
      if ("refuse" in decision) {
        const { refuse, code = "forbidden" } = decision as { refuse: unknown; code?: unknown };
        if (typeof code !== "string" || !CONNECT_CODES.has(code)) {
          throw new HookFailure(`onConnect refused with code ${JSON.stringify(code)}: use forbidden, unauthorized or try_again_later`);
        }
        this.#options.count("connect_refused");
        return { ok: false, code: code as ConnectRefusalCode, message: refusalText(refuse, "refused by the room") };
      }
      const { data, canPublish } = decision as { data?: unknown; canPublish?: unknown };
      if (canPublish !== undefined && typeof canPublish !== "boolean") throw new HookFailure("onConnect's canPublish must be a boolean");
      if (data === undefined) return { ok: true, data: undefined, canPublish };
      const checked = checkConnectionData(data);
      if (!checked.ok) throw new HookFailure(`onConnect: ${checked.error.message}`);
      return { ok: true, data: checked.value, canPublish };
    } catch (error) {
      this.#failed("onConnect", error, request.id);
      return { ok: false, code: "internal", message: "the room could not admit the socket" };
    }
  }

  /**
   * Runs beforePublish on a message, before it has a seq. `data` is the
   * parsed message when the caller has it (a socket publish), else it is
   * parsed from `dataJson`. An unchanged message keeps its JSON text as sent.
   */
  async checkPublish(dataJson: string, data: unknown, origin: PublishOrigin): Promise<PublishCheck> {
    const hook = this.#hooks.beforePublish;
    if (!hook) return { ok: true, dataJson };
    const socket = origin.kind === "socket" ? origin.socket.attachment.id : undefined;
    try {
      const source: PublishSource<Data> =
        origin.kind === "socket"
          ? { kind: "socket", connection: this.connection(origin.socket) }
          : origin.kind === "pusher"
            ? { kind: "pusher", event: origin.event }
            : { kind: origin.kind };
      const request: PublishRequest<Data> = { room: this.#room.roomName(), data: data === undefined ? JSON.parse(dataJson) : data, source };
      const decision: unknown = await hook(request);
      if (decision === undefined || decision === null) return { ok: true, dataJson };
      if (typeof decision !== "object") throw new HookFailure("beforePublish must return nothing, { data } or { refuse, code }");
      if ("refuse" in decision) {
        const { refuse, code = "bad_request" } = decision as { refuse: unknown; code?: unknown };
        if (typeof code !== "string" || !PUBLISH_CODES.has(code)) {
          throw new HookFailure(`beforePublish refused with code ${JSON.stringify(code)}: use bad_request, forbidden or rate_limited`);
        }
        this.#options.count("publish_refused");
        return { ok: false, refusal: { error: code as PublishRefusalCode, message: refusalText(refuse, "refused by the room") } };
      }
      if (!("data" in decision)) return { ok: true, dataJson };
      const transformed = JSON.stringify((decision as { data: unknown }).data) as string | undefined;
      if (transformed === undefined) throw new HookFailure("beforePublish returned data that is not a JSON value");
      const bytes = utf8Length(transformed);
      if (bytes > this.#options.maxMessageBytes) {
        this.#options.count("publish_refused");
        return {
          ok: false,
          refusal: { error: "too_large", message: `the message as the room transformed it is ${bytes} bytes as JSON, over ${this.#options.maxMessageBytes}` },
        };
      }
      return { ok: true, dataJson: transformed };
    } catch (error) {
      this.#failed("beforePublish", error, socket);
      return { ok: false, refusal: { error: "internal", message: "the room could not check the message" } };
    }
  }

  /** Runs onClientFrame; false when it failed (the caller answers with an `internal` error). */
  async clientFrame(socket: SocketState, frame: CustomClientFrame): Promise<boolean> {
    const hook = this.#hooks.onClientFrame;
    if (!hook) return false;
    const state = socket;
    try {
      await hook(this.connection(socket), frame);
      return true;
    } catch (error) {
      this.#failed("onClientFrame", error, state.attachment.id);
      return false;
    }
  }

  /**
   * Runs `task` after every earlier task of the same socket; null (nothing
   * run) when MAX_FRAMES_AWAITING_HOOKS are already waiting.
   */
  inOrder(state: SocketState, task: () => Promise<void>): Promise<void> | null {
    let queue = this.#queues.get(state);
    if (!queue) {
      queue = { tail: Promise.resolve(), waiting: 0 };
      this.#queues.set(state, queue);
    } else if (queue.waiting >= MAX_FRAMES_AWAITING_HOOKS) {
      return null;
    }
    const current = queue;
    current.waiting += 1;
    const run = current.tail.then(task).finally(() => {
      current.waiting -= 1;
      if (current.waiting === 0 && this.#queues.get(state) === current) this.#queues.delete(state);
    });
    // The chain goes on whatever one task did; the caller sees its own task's outcome.
    current.tail = run.catch(() => undefined);
    return run;
  }

  /** Runs onClose for a socket that left, after its waiting frames; never throws. */
  async closed(state: SocketState, cause: LeaveCause): Promise<void> {
    const hook = this.#hooks.onClose;
    if (!hook) return;
    // Never inside the caller's loop (a failed send in the fan-out ends up here): a turn later at least.
    await (this.#queues.get(state)?.tail ?? Promise.resolve());
    try {
      await hook(this.connection(state), { code: cause.code, reason: cause.reason, by: cause.by });
    } catch (error) {
      this.#failed("onClose", error, state.attachment.id);
    }
  }

  #failed(hook: HookName, error: unknown, socket: string | undefined): void {
    this.#options.count("hook_error");
    logEvent("hook_error", {
      room: this.#room.roomName(),
      hook,
      socket: socket ?? null,
      error: String(error),
      stack: error instanceof Error && !(error instanceof HookFailure) ? error.stack : undefined,
    });
  }
}

function refusalText(value: unknown, fallback: string): string {
  const text = typeof value === "string" && value !== "" ? value : fallback;
  return text.length > MAX_REFUSAL_CHARS ? `${text.slice(0, MAX_REFUSAL_CHARS)}…` : text;
}
