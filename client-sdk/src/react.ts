/**
 * React binding: `useRoom(options)` opens a room for as long as a component
 * is mounted and re-renders it with the connection state and the latest
 * messages; with `connection`, the room is a subscription on a shared
 * FanoutClient's socket instead. Import it from `@edge-fanout/client/react`;
 * React 18 or newer is a peer dependency.
 */
import { useCallback, useEffect, useRef, useState } from "react";
import {
  PublishError,
  RoomClient,
  type ConnectionState,
  type FanoutClient,
  type RoomClientOptions,
  type RoomLostEvent,
  type RoomMember,
  type RoomMessageEvent,
  type RoomPresence,
  type RoomStateEvent,
  type RoomSubscription,
  type StateCause,
  type SubscriptionCause,
  type SubscriptionStateEvent,
} from "./index.js";

/** One delivered message, as `useRoom` keeps it. */
export interface RoomMessage<T> {
  /** Position in the room's history. */
  seq: number;
  /** The message's data. */
  data: T;
  /** Publish time, epoch milliseconds (server clock). */
  ts: number;
}

/**
 * What `useRoom` opens: a room's address and a `RoomClient`'s options, and
 * what the hook itself keeps and calls.
 *
 * @see client-sdk/README.md#react
 */
export interface UseRoomOptions<T> extends RoomClientOptions {
  /**
   * false: no connection (for example until the user signs in).
   * @default true
   */
  enabled?: boolean;
  /**
   * How many of the latest messages `messages` holds; 0 holds none and re-renders on none (use `onMessage`).
   * @default 100
   */
  keep?: number;
  /** Called once for every message, in order. The latest function is called; changing it does not reconnect. */
  onMessage?: (event: RoomMessageEvent<T>) => void;
  /** Called when messages will never arrive (reload state derived from the stream). */
  onLost?: (event: RoomLostEvent) => void;
  /**
   * A FanoutClient whose one connection this room shares: the hook follows
   * `room` as a subscription on it (from `since`/`epoch` when it is the first
   * component to ask) instead of opening a socket of its own, so any number
   * of components use one socket. Components that follow the same room share
   * its subscription, which ends when the last of them unmounts. The
   * client's own options (host, token, backoff...) apply; those given here
   * besides `room`, `since` and `epoch` are not used. The application owns
   * the client and closes it. Absent, each component opens a socket of its own.
   * @default null
   */
  connection?: FanoutClient | null;
}

/**
 * What `useRoom` gives a component on each render.
 *
 * @see client-sdk/README.md#react
 */
export interface UseRoomResult<T, I = unknown> {
  /** Connection state: connecting | open | reconnecting | closed. */
  state: ConnectionState;
  /** Close code of the connection that ended last, e.g. 4001 when the token was refused. */
  code: number | undefined;
  /** Why the state last changed, e.g. "auth_refused" when the token was refused (see StateCause); undefined before the first change. */
  cause: StateCause | undefined;
  /** The latest `keep` messages, oldest first. */
  messages: ReadonlyArray<RoomMessage<T>>;
  /** Publishes over the socket; resolves with the seq (see RoomClient.publish). Stable across renders. */
  publish: (data: T) => Promise<number>;
  /**
   * Who is in the room: its member count, and its members (empty above the
   * room's member cap, where the room sends only the count). Re-rendered on
   * every presence event.
   */
  presence: { count: number; members: ReadonlyArray<RoomMember<I>> };
  /** The client, for what the hook does not cover; null before the first effect, when disabled, and with `connection`. */
  client: RoomClient<T, I> | null;
  /** With `connection`: the room's subscription on it (null before the first effect and when disabled). */
  subscription: RoomSubscription<T, I> | null;
  /** With `connection`: why the subscription last changed, e.g. "forbidden" or "too_many_rooms"; undefined otherwise. */
  subscriptionCause: SubscriptionCause | undefined;
}

/** The client a component holds, and the connection it was opened for. */
interface Held<T, I> {
  client: RoomClient<T, I>;
  key: string;
  /** A close waiting to see whether the component comes straight back (strict mode). */
  release: ReturnType<typeof setTimeout> | undefined;
}

/** What the hook reads from the client after each watched event. */
type Snapshot<I> = Pick<UseRoomResult<unknown, I>, "state" | "presence">;

/** Events after which the hook re-reads the client with `read`. */
const WATCHED = ["state", "presence"] as const;

const NOBODY: Snapshot<never>["presence"] = { count: 0, members: [] };

/** A room the hook follows: a client of its own, or a subscription on a shared connection. */
type Source<I> = { readonly state: ConnectionState; readonly presence: RoomPresence<I> };

function read<I>(source: Source<I> | null, enabled: boolean): Snapshot<I> {
  const state = source?.state ?? (enabled ? "connecting" : "closed");
  if (!source) return { state, presence: NOBODY };
  const { count, members } = source.presence;
  return { state, presence: { count, members: members ? [...members.values()] : [] } };
}

/**
 * A subscription's state as a connection state: open once subscribed,
 * connecting or reconnecting (as its connection is) while it is asked for,
 * closed once it ended.
 */
function asSource<I>(subscription: RoomSubscription<unknown, I>, connection: FanoutClient): Source<I> {
  const { state } = subscription;
  return {
    state: state === "subscribed" ? "open" : state === "unsubscribed" ? "closed" : connection.state === "reconnecting" ? "reconnecting" : "connecting",
    presence: subscription.presence,
  };
}

/** How many mounted components follow each shared subscription: the last one to leave unsubscribes. */
const holders = new WeakMap<RoomSubscription, number>();

/** The subscription to the latest options' room on `connection`, held for one more component. */
function holdSubscription<T, I>(connection: FanoutClient, options: UseRoomOptions<T>): RoomSubscription<T, I> {
  const subscription = connection.room<T, I>(options.room ?? "", { since: options.since, epoch: options.epoch });
  holders.set(subscription as RoomSubscription, (holders.get(subscription as RoomSubscription) ?? 0) + 1);
  return subscription;
}

/** One component less; after a turn of the event loop (strict mode mounts again at once), the last one unsubscribes. */
function releaseSubscription(subscription: RoomSubscription): void {
  setTimeout(() => {
    const left = (holders.get(subscription) ?? 1) - 1;
    if (left > 0) holders.set(subscription, left);
    else {
      holders.delete(subscription);
      subscription.unsubscribe();
    }
  }, 0);
}

/** What identifies a connection: options outside it apply when it opens, and changing them does not reconnect. */
function connectionKey(options: RoomClientOptions): string {
  const token = typeof options.token === "string" ? options.token : null;
  return JSON.stringify([options.url, options.host, options.room, token, options.member ?? null, options.info ?? null]);
}

/**
 * Subscribes the component to a room. The connection opens on mount and
 * closes on unmount or when the room (url, host, room, a string token)
 * changes. Other options (backoff, since, callbacks, a token function) are
 * read when needed, so passing new objects or functions on each render is
 * fine.
 *
 * Strict mode mounts, unmounts and mounts again at once; the hook closes a
 * client only after a turn of the event loop, so that the second mount takes
 * over the first one's socket: one socket per mounted component.
 *
 * With `connection` (a FanoutClient), every component shares that one
 * socket: the room is a subscription on it, and `state` is the room's
 * ("open" once subscribed, "closed" once the subscription ended: see
 * `subscriptionCause`), while `cause` and `code` are the connection's.
 *
 * @typeParam T the type of message data.
 * @typeParam I the type of member data (a token's `info`).
 * @param options the room, a `RoomClient`'s options, and `enabled`, `keep`, `onMessage`, `onLost`, `connection`.
 * @returns the connection's state, the latest messages, presence and `publish`.
 *
 * @example
 * ```ts
 * import { useRoom } from "@edge-fanout/client/react";
 *
 * function Lobby() {
 *   const { state, messages, publish, presence } = useRoom<Chat, { name: string }>({ room: "lobby", token: getToken });
 *   // ...render `messages`, `presence.members`, and call `publish({ text })`.
 * }
 * // Many rooms, one socket: a FanoutClient made once, for the whole application.
 * const fanout = new FanoutClient({ token: getToken });
 * function Ticker() {
 *   const { messages } = useRoom<Chat>({ room: "ticker", connection: fanout });
 * }
 * ```
 *
 * @see client-sdk/README.md#react
 */
export function useRoom<T = unknown, I = unknown>(options: UseRoomOptions<T>): UseRoomResult<T, I> {
  const enabled = options.enabled ?? true;
  const connection = options.connection ?? null;
  const key = !enabled ? null : connection ? JSON.stringify([options.room]) : connectionKey(options);
  const latest = useRef(options);
  const held = useRef<Held<T, I> | null>(null);
  const shared = useRef<RoomSubscription<T, I> | null>(null);
  const [snapshot, setSnapshot] = useState<Snapshot<I>>(() => read<I>(null, enabled));
  const [code, setCode] = useState<number | undefined>(undefined);
  const [cause, setCause] = useState<StateCause | undefined>(undefined);
  const [subscriptionCause, setSubscriptionCause] = useState<SubscriptionCause | undefined>(undefined);
  const [messages, setMessages] = useState<ReadonlyArray<RoomMessage<T>>>([]);

  useEffect(() => {
    latest.current = options;
  });

  useEffect(() => {
    if (key === null) {
      setSnapshot(read<I>(null, false));
      return;
    }
    const onState = (event: RoomStateEvent): void => {
      if (event.code !== undefined) setCode(event.code);
      setCause(event.cause);
    };
    const onMessage = (event: RoomMessageEvent<T>): void => {
      latest.current.onMessage?.(event);
      const keep = latest.current.keep ?? 100;
      if (keep <= 0) return;
      const message: RoomMessage<T> = { seq: event.seq, data: event.data, ts: event.ts };
      setMessages((list) => (list.length >= keep ? [...list.slice(list.length - keep + 1), message] : [...list, message]));
    };
    const onLost = (event: RoomLostEvent): void => latest.current.onLost?.(event);
    if (connection) {
      held.current?.client.close();
      held.current = null;
      const subscription = holdSubscription<T, I>(connection, latest.current);
      shared.current = subscription;
      setMessages((list) => (list.length === 0 ? list : []));
      setSubscriptionCause(undefined);
      const refresh = (): void => setSnapshot(read(asSource(subscription as RoomSubscription<unknown, I>, connection), true));
      const onSubscriptionState = (event: SubscriptionStateEvent): void => {
        setSubscriptionCause(event.cause);
        refresh();
      };
      subscription.addEventListener("state", onSubscriptionState);
      subscription.addEventListener("presence", refresh);
      subscription.addEventListener("message", onMessage);
      subscription.addEventListener("lost", onLost);
      connection.addEventListener("state", onState);
      connection.addEventListener("state", refresh);
      refresh();
      return () => {
        subscription.removeEventListener("state", onSubscriptionState);
        subscription.removeEventListener("presence", refresh);
        subscription.removeEventListener("message", onMessage);
        subscription.removeEventListener("lost", onLost);
        connection.removeEventListener("state", onState);
        connection.removeEventListener("state", refresh);
        if (shared.current === subscription) shared.current = null;
        releaseSubscription(subscription as RoomSubscription);
      };
    }
    shared.current = null;
    let mine = held.current;
    if (mine !== null && mine.key === key && mine.client.state !== "closed") {
      clearTimeout(mine.release); // Strict mode's second mount: keep the socket.
      mine.release = undefined;
    } else {
      mine?.client.close();
      mine = { client: openClient<T, I>(latest), key, release: undefined };
      held.current = mine;
      setMessages((list) => (list.length === 0 ? list : []));
      setCode(undefined);
      setCause(undefined);
    }
    const { client } = mine;
    const refresh = (): void => setSnapshot(read(client as RoomClient<unknown, I>, true));
    for (const type of WATCHED) client.addEventListener(type, refresh);
    client.addEventListener("state", onState);
    client.addEventListener("message", onMessage);
    client.addEventListener("lost", onLost);
    refresh();
    const owned = mine;
    return () => {
      for (const type of WATCHED) client.removeEventListener(type, refresh);
      client.removeEventListener("state", onState);
      client.removeEventListener("message", onMessage);
      client.removeEventListener("lost", onLost);
      owned.release = setTimeout(() => {
        owned.client.close();
        if (held.current === owned) held.current = null;
      }, 0);
    };
  }, [key, connection]);

  const publish = useCallback((data: T): Promise<number> => {
    const room = shared.current ?? held.current?.client;
    return room ? room.publish(data) : Promise.reject(new PublishError("closed", "the room is not open: the component is not mounted or the hook is disabled"));
  }, []);

  return {
    state: snapshot.state,
    presence: snapshot.presence,
    code,
    cause,
    messages,
    publish,
    client: held.current?.client ?? null,
    subscription: shared.current,
    subscriptionCause: connection ? subscriptionCause : undefined,
  };
}

/** A client for the latest options, asking the latest token function when the option is one. */
function openClient<T, I>(latest: { readonly current: UseRoomOptions<T> }): RoomClient<T, I> {
  const { enabled: _enabled, keep: _keep, onMessage: _onMessage, onLost: _onLost, connection: _connection, ...options } = latest.current;
  if (typeof options.token === "function") {
    options.token = () => {
      const token = latest.current.token;
      return typeof token === "function" ? token() : (token ?? "");
    };
  }
  return new RoomClient<T, I>(options);
}
