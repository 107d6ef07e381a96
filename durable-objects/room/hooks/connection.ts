import { closeReason, isCustomType, type CustomServerEvent } from "../../../protocol";
import type { MemberIdentity } from "../../../common/members";
import { utf8Length } from "../../../common/utf8";
import type { Delivery } from "../../engine/delivery";
import type { SocketState } from "../../engine/socket-state";
import { checkConnectionData } from "./connection-data";
import type { Connection, HookCloseCode, JsonObject, MemberView } from "./hooks";

/** What a connection view needs of the room. */
export interface ConnectionRoom {
  readonly delivery: Delivery;
  roomName(): string;
  /** MAX_MESSAGE_BYTES: the largest event a hook may send. */
  readonly maxEventBytes: number;
}

const CLOSE_CODES: ReadonlySet<number> = new Set<HookCloseCode>([1000, 1013, 4001, 4003]);

/** A member's identity as hooks see it: member data parsed from the JSON text the attachment keeps. */
export function memberView(member: MemberIdentity | undefined): MemberView | null {
  if (!member) return null;
  let info: unknown;
  if (member.info !== undefined) {
    try {
      info = JSON.parse(member.info);
    } catch {
      // Checked at the edge; an attachment never holds anything else.
      info = undefined;
    }
  }
  return { id: member.id, info, verified: member.verified };
}

/**
 * The `Connection` hooks receive: a view over one socket and its state, made
 * for each hook call (the fan-out never makes one). Everything it does goes
 * through the delivery engine, so a hook cannot send a socket anything but
 * `x-` events, or touch its cursor or window.
 */
export class RoomConnection<Data extends object = JsonObject> implements Connection<Data> {
  readonly #state: SocketState;
  readonly #room: ConnectionRoom;
  #member: MemberView | null | undefined;

  constructor(state: SocketState, room: ConnectionRoom) {
    this.#state = state;
    this.#room = room;
  }

  get id(): string {
    return this.#state.attachment.id;
  }

  get room(): string {
    return this.#room.roomName();
  }

  get member(): MemberView | null {
    if (this.#member === undefined) this.#member = memberView(this.#state.attachment.member);
    return this.#member;
  }

  get canPublish(): boolean {
    return this.#state.attachment.canPublish;
  }

  get connectedAt(): number {
    return this.#state.attachment.connectedAt;
  }

  get data(): Readonly<Data> | null {
    return (this.#state.attachment.data as Data | undefined) ?? null;
  }

  get open(): boolean {
    return this.#room.delivery.get(this.#state.ws) === this.#state;
  }

  setData(data: Data | null): void {
    const attachment = this.#state.attachment;
    if (data === null) {
      delete attachment.data;
    } else {
      const checked = checkConnectionData(data);
      if (!checked.ok) throw checked.error;
      attachment.data = checked.value;
    }
    // A socket that already left has no attachment worth keeping.
    if (this.open) this.#state.ws.serializeAttachment(attachment);
  }

  send(event: CustomServerEvent): boolean {
    if (typeof event !== "object" || event === null || !isCustomType(event.type)) {
      throw new TypeError('a hook may only send events whose type starts with "x-" (letters, digits, . _ : -, at most 64 after it)');
    }
    const text = JSON.stringify(event);
    if (utf8Length(text) > this.#room.maxEventBytes) {
      throw new RangeError(`event over ${this.#room.maxEventBytes} bytes as JSON`);
    }
    if (!this.open) return false;
    return this.#room.delivery.sendControl(this.#state, text);
  }

  close(code: HookCloseCode = 1000, reason = ""): void {
    if (!CLOSE_CODES.has(code)) throw new RangeError(`a hook may close with 1000, 1013, 4001 or 4003, not ${code}`);
    if (this.open) this.#room.delivery.close(this.#state.ws, code, closeReason(String(reason)));
  }
}
