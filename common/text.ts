/**
 * Rules for text that crosses from a client (a token's claims, a query
 * parameter) into a header, a URL or storage: it must be well-formed UTF-16
 * (no lone surrogate, which has no UTF-8 form: encodeURIComponent throws on
 * it, TextEncoder replaces it) and free of control characters.
 */

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
// Control characters (C0, DEL, C1) have no place in an identifier shown to people.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** Whether `text` is well-formed UTF-16: every surrogate is half of a pair. */
export function isWellFormed(text: string): boolean {
  return !LONE_SURROGATE.test(text);
}

/** Whether `text` can name something (a member, a room prefix): well-formed, without control characters. */
export function isPrintable(text: string): boolean {
  return isWellFormed(text) && !CONTROL.test(text);
}

/**
 * JSON text of `value` when every string in it, keys included, is well-formed
 * (JSON.stringify writes a lone surrogate as an escape, so the text alone
 * cannot tell); null otherwise, or when `value` has no JSON form.
 */
export function wellFormedJson(value: unknown): string | null {
  let wellFormed = true;
  let json: string | undefined;
  try {
    json = JSON.stringify(value, (key: string, item: unknown) => {
      if (!isWellFormed(key) || (typeof item === "string" && !isWellFormed(item))) wellFormed = false;
      return item;
    });
  } catch {
    return null;
  }
  return wellFormed && json !== undefined ? json : null;
}
