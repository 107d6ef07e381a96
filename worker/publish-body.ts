import type { ErrorCode } from "../client-sdk/src/protocol";

export type DecodedBody = { ok: true; dataJson: string } | { ok: false; error: ErrorCode; message: string };

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/**
 * Turns an HTTP publish body into the message's data as JSON text: a JSON body
 * (application/json or +json) is that JSON value, any other body is a string.
 * The result is normalized by one parse and one stringify, here at the edge,
 * so the room can embed it in events without parsing again.
 */
export async function decodePublishBody(request: Request): Promise<DecodedBody> {
  const bytes = await request.arrayBuffer();
  if (bytes.byteLength === 0) return { ok: false, error: "bad_request", message: "the message body is empty" };
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { ok: false, error: "bad_request", message: "the message body must be UTF-8 text" };
  }
  const type = (request.headers.get("content-type") ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  if (type === "application/json" || type.endsWith("+json")) {
    try {
      return { ok: true, dataJson: JSON.stringify(JSON.parse(text)) };
    } catch {
      return { ok: false, error: "bad_json", message: "the body is labelled JSON but does not parse" };
    }
  }
  return { ok: true, dataJson: JSON.stringify(text) };
}
