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
  readonly bubbles: boolean;
  readonly cancelable: boolean;
  readonly defaultPrevented: boolean;
  readonly isTrusted: boolean;
  readonly eventPhase: number;
  preventDefault(): void;
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
  passive?: boolean;
  capture?: boolean;
  /** Remove the listener when this signal aborts. */
  signal?: { readonly aborted: boolean };
}

/** An EventTarget whose events are typed by the map `M` (event name -> event class). */
export interface TypedEventTarget<M> {
  addEventListener<K extends keyof M & string>(type: K, listener: RoomListener<M[K]> | null, options?: boolean | RoomListenerOptions): void;
  addEventListener(type: string, listener: RoomListener<RoomEventBase> | null, options?: boolean | RoomListenerOptions): void;
  removeEventListener<K extends keyof M & string>(type: K, listener: RoomListener<M[K]> | null, options?: boolean | { capture?: boolean }): void;
  removeEventListener(type: string, listener: RoomListener<RoomEventBase> | null, options?: boolean | { capture?: boolean }): void;
  dispatchEvent(event: RoomEventBase): boolean;
}

/** The platform's EventTarget, typed by an event map. */
export const RoomEventTarget = EventTarget as unknown as new <M>() => TypedEventTarget<M>;

/** The platform's Event, typed without the DOM lib. */
export const RoomEvent = Event as unknown as new (type: string) => RoomEventBase;
