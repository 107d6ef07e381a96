/**
 * Typed listeners over the platform's EventTarget and Event, declared here so
 * the SDK's types need neither the DOM lib nor @types/node: a Node project
 * compiled with `lib: ["es2022"]` type-checks against them. At run time these
 * are the platform's own classes; nothing here adds code but two casts.
 */

/** The parts of a platform Event that room events carry. */
export interface RoomEventBase {
  /** The event's name, e.g. "message". */
  readonly type: string;
  /** When the event was created, in milliseconds (the platform's clock). */
  readonly timeStamp: number;
  /** False: room events do not bubble. */
  readonly bubbles: boolean;
  /** False: room events cannot be cancelled. */
  readonly cancelable: boolean;
  /** Always false, as room events cannot be cancelled. */
  readonly defaultPrevented: boolean;
  /** False: the client dispatched it, not the platform. */
  readonly isTrusted: boolean;
  /** The platform's dispatch phase (2 while listeners run). */
  readonly eventPhase: number;
  /** The platform's; it does nothing to an event that cannot be cancelled. */
  preventDefault(): void;
  /** The platform's; a client has no other targets to stop at. */
  stopPropagation(): void;
  /** Keeps listeners added after the current one from seeing this event. */
  stopImmediatePropagation(): void;
}

/**
 * A listener: a function, or an object with `handleEvent`, as the platform
 * accepts. Its parameter is checked bivariantly (as DOM listeners are), so a
 * listener written for the platform's `Event` fits too.
 */
export type RoomListener<E> = { bivarianceHack(event: E): void }["bivarianceHack"] | { handleEvent(event: E): void };

/** Options for `addEventListener`; a platform AbortSignal fits `signal`. */
export interface RoomListenerOptions {
  /** Remove the listener after its first call. */
  once?: boolean;
  /** The platform's; room events cannot be cancelled anyway. */
  passive?: boolean;
  /** The platform's; a client has no capture phase of its own. */
  capture?: boolean;
  /** Remove the listener when this signal aborts. */
  signal?: { readonly aborted: boolean };
}

/**
 * An EventTarget whose events are typed by the map `M` (event name -> event class).
 *
 * @example
 * ```ts
 * const controller = new AbortController();
 * room.addEventListener("message", (e) => render(e.seq, e.data), { signal: controller.signal });
 * controller.abort(); // removes the listener
 * ```
 */
export interface TypedEventTarget<M> {
  /**
   * Calls `listener` with every event of `type`; the event's class follows from `type`.
   * @param type the event's name, e.g. "message".
   * @param listener a function, or an object with `handleEvent`.
   * @param options `once`, `signal`, or the platform's `capture` as a boolean.
   */
  addEventListener<K extends keyof M & string>(type: K, listener: RoomListener<M[K]> | null, options?: boolean | RoomListenerOptions): void;
  addEventListener(type: string, listener: RoomListener<RoomEventBase> | null, options?: boolean | RoomListenerOptions): void;
  /**
   * Stops calling `listener` for `type`.
   * @param type the event's name.
   * @param listener the listener that was added.
   * @param options the `capture` it was added with.
   */
  removeEventListener<K extends keyof M & string>(type: K, listener: RoomListener<M[K]> | null, options?: boolean | { capture?: boolean }): void;
  removeEventListener(type: string, listener: RoomListener<RoomEventBase> | null, options?: boolean | { capture?: boolean }): void;
  /**
   * The platform's: calls the listeners of `event.type`; the client dispatches its own events.
   * @param event the event.
   * @returns false only for a cancelled event, which room events never are.
   */
  dispatchEvent(event: RoomEventBase): boolean;
}

/** The platform's EventTarget, typed by an event map. */
export const RoomEventTarget = EventTarget as unknown as new <M>() => TypedEventTarget<M>;

/** The platform's Event, typed without the DOM lib. */
export const RoomEvent = Event as unknown as new (type: string) => RoomEventBase;
