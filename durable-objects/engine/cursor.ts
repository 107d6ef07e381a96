import type { MemberIdentity } from "../../common/members";
import type { SocketState } from "./socket-state";

/** How a socket follows a room beyond where it starts: who it is in the room's presence, and whether it only watches that presence. */
export interface FollowAs {
  /** Its identity in this room alone (a Pusher presence channel's member, signed per channel); its own when absent. */
  member?: MemberIdentity;
  /** It follows the room's presence and none of its messages (a Pusher user's watchlist: who is online). */
  watching?: true;
}
import type { Stream } from "./stream";

/**
 * One socket's position in one room: the seq it has been sent up to (or told
 * it lost), and, while it is behind, where catch-up continues and since when
 * it made no progress. Its window is the socket's, shared by every room the
 * socket follows.
 */
export class Cursor {
  readonly socket: SocketState;
  readonly stream: Stream;
  /** Which of the socket's rooms this is: the index its window marks carry. */
  readonly index: number;
  /** Highest seq sent to this socket in this room (or reported lost to it). */
  sentSeq: number;
  /** While behind: the history row that holds `sentSeq + 1`, when known (0 = look it up). */
  nextRow = 0;
  /** While behind: when the cursor last made progress (fell behind, or an ack released a frame). Null when level. */
  stalledSince: number | null = null;
  /** Presence events of this room were withheld (no room in the window): it gets a fresh snapshot when it has room again. */
  presenceStale = false;
  /**
   * Who the socket is in this room's presence: its own identity (the attachment's), unless it
   * is someone of this room alone (a Pusher presence channel's member, signed per channel).
   */
  readonly member: MemberIdentity | undefined;
  /** The socket watches the room's presence only: the room's messages pass it by (its seq moves on all the same). */
  readonly watching: boolean;

  constructor(socket: SocketState, stream: Stream, index: number, sentSeq: number, as: FollowAs = {}) {
    this.socket = socket;
    this.stream = stream;
    this.index = index;
    this.sentSeq = sentSeq;
    this.member = as.member ?? socket.attachment.member;
    this.watching = as.watching === true;
  }

  get behind(): boolean {
    return this.stalledSince !== null;
  }
}
