import type { WebhookEventType } from "../../protocol";
import type { Message } from "../engine/message";

/**
 * The JSON text of webhook events (protocol/webhooks.ts), built once when an
 * event is recorded and stored and sent as it is. Data that is already JSON
 * text (a member's info, a message's data) is embedded without parsing it
 * again.
 */

/** One event, complete. */
export function eventText(id: string, type: WebhookEventType, room: string, ts: number, dataJson: string): string {
  return `{"id":${JSON.stringify(id)},"type":"${type}","room":${JSON.stringify(room)},"ts":${ts},"data":${dataJson}}`;
}

/** `member.joined`'s data; `info` is the member's info as JSON text, when it has one. */
export function joinedData(id: string, info: string | undefined, verified: boolean): string {
  const infoField = info === undefined ? "" : `,"info":${info}`;
  return `{"member":{"id":${JSON.stringify(id)}${infoField},"verified":${verified}}}`;
}

/** `member.left`'s data. */
export function leftData(id: string, inferred: boolean): string {
  return `{"member":{"id":${JSON.stringify(id)}},"inferred":${inferred}}`;
}

/** `room.vacated`'s data. */
export function vacatedData(inferred: boolean): string {
  return `{"inferred":${inferred}}`;
}

/**
 * `message.published`'s data and time, cut out of the stored message event
 * (engine/message.ts writes `..."data":<data>,"ts":<ts>,"tag":<tag>}` with
 * numbers last, so the last `,"ts":` is the event's own).
 */
export function publishedData(message: Message, epoch: string): { ts: number; dataJson: string } {
  const event = message.event;
  const dataStart = event.indexOf(`"data":`) + 7;
  const tsAt = event.lastIndexOf(`,"ts":`);
  const tagAt = event.lastIndexOf(`,"tag":`);
  const ts = Number(event.slice(tsAt + 6, tagAt));
  return { ts, dataJson: `{"seq":${message.seq},"epoch":${JSON.stringify(epoch)},"data":${event.slice(dataStart, tsAt)}}` };
}
