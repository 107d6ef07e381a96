/**
 * UTF-8 byte length of a string without encoding it. Windows and limits are in
 * bytes on the wire; string length undercounts anything beyond ASCII.
 */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) continue;
    if (code < 0x800) bytes += 1;
    else if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
      // A surrogate pair is two UTF-16 units and four bytes.
      bytes += 2;
      i += 1;
    } else bytes += 2;
  }
  return bytes;
}
