import type { ErrorCode } from "../protocol";
import { utf8Length } from "../common/utf8";

export type DecodedBody = { ok: true; dataJson: string } | { ok: false; status: 400 | 413; error: ErrorCode; message: string };

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/**
 * Turns an HTTP publish body into the message's data as JSON text: a JSON body
 * (application/json or +json) is that JSON value, any other body is a string.
 * The result is normalized by one parse and one stringify, here at the edge,
 * so the room can embed it in events without parsing again.
 *
 * The limit applies to that JSON text, the form the room stores and sends, not
 * to the body: serializing can grow a body several times over (a control
 * character in a string becomes a six-byte escape, `1e20` becomes 21 digits).
 */
export function decodePublishBody(bytes: Uint8Array, contentType: string | null, maxBytes: number): DecodedBody {
  if (bytes.byteLength === 0) return { ok: false, status: 400, error: "bad_request", message: "the message body is empty" };
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { ok: false, status: 400, error: "bad_request", message: "the message body must be UTF-8 text" };
  }
  const type = (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  let dataJson: string;
  if (type === "application/json" || type.endsWith("+json")) {
    try {
      dataJson = JSON.stringify(JSON.parse(text));
    } catch {
      return { ok: false, status: 400, error: "bad_json", message: "the body is labelled JSON but does not parse" };
    }
  } else {
    dataJson = JSON.stringify(text);
  }
  const size = utf8Length(dataJson);
  if (size > maxBytes) {
    return {
      ok: false,
      status: 413,
      error: "too_large",
      message: `the message is ${size} bytes as JSON (the form it is stored and sent in), over the limit of ${maxBytes}`,
    };
  }
  return { ok: true, dataJson };
}
