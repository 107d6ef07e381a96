import { Room, type ConnectDecision, type ConnectRequest, type FanoutEnv, type PublishDecision, type PublishRequest } from "edge-fanout";

/** The worker's environment: the fan-out bindings and vars, plus this worker's own. */
export interface Env extends FanoutEnv {
  /** Display names the room turns away (comma-separated). */
  BANNED_NAMES?: string;
}

/** What ChatRoom attaches to each socket: who is talking. It survives hibernation. */
export interface Speaker {
  name: string;
  /** True when a token vouched for the name (TOKEN_SECRET set), false for a name chosen in open mode. */
  verified: boolean;
}

/** A chat message as the room publishes it. */
export interface ChatMessage {
  text: string;
  from: string;
  verified: boolean;
}

const NAME = /^[\p{L}\p{N} _.-]{1,32}$/u;
const MAX_TEXT = 500;

/**
 * A chat room: a `Room` with two hooks.
 * - onConnect admits a socket only with a display name (the token's `sub`
 *   when tokens are on, else `?name=`), not on the banned list, and attaches
 *   it to the socket;
 * - beforePublish accepts `{ "text": "..." }` (1-500 characters once trimmed)
 *   and publishes it signed with the speaker's name from the socket's data,
 *   so nobody can post as someone else. The team's backend (HTTP publishes,
 *   with the publish key) and broadcasts speak as "system".
 */
export class ChatRoom extends Room<Env, Speaker> {
  protected override onConnect({ member, request }: ConnectRequest): ConnectDecision<Speaker> {
    const name = member?.verified ? member.id : new URL(request.url).searchParams.get("name")?.trim();
    if (!name || !NAME.test(name)) return { refuse: "join with a display name: ?name= (1-32 letters, digits, spaces, _ . -)" };
    const banned = (this.env.BANNED_NAMES ?? "").split(",").map((n) => n.trim().toLowerCase());
    if (banned.includes(name.toLowerCase())) return { refuse: "this name may not join", code: "forbidden" };
    return { data: { name, verified: member?.verified ?? false } };
  }

  protected override beforePublish({ data, source }: PublishRequest<Speaker>): PublishDecision {
    const text = typeof data === "object" && data !== null && "text" in data ? (data as { text: unknown }).text : undefined;
    if (typeof text !== "string" || text.trim() === "") return { refuse: 'a chat message is {"text": "..."}' };
    if (text.length > MAX_TEXT) return { refuse: `a chat message is at most ${MAX_TEXT} characters` };
    const speaker = source.kind === "socket" ? source.connection.data : null;
    const message: ChatMessage = speaker
      ? { text: text.trim(), from: speaker.name, verified: speaker.verified }
      : { text: text.trim(), from: "system", verified: true };
    return { data: message };
  }
}
