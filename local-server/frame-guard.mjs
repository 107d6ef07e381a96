// Watches what a WebSocket client sends through the accept gate and says when
// a message grows past the room's frame limit, from the frame headers alone.
//
// workerd buffers a client message whole, up to 32 MiB, before the room sees
// it and can refuse it (1009): the hibernatable socket's read loop uses the KJ
// default, and neither the workerd config nor a compatibility flag lowers it.
// The gate sees the bytes first, so it can refuse the message at the header
// that announces it, before workerd buffers any of it.
//
// The guard starts at the first byte after the upgrade's request head (the
// gate finds it, http-requests.mjs) and follows the frame headers of RFC
// 6455: payloads are counted, never buffered.

const CLOSE_TOO_BIG = 1009;

/**
 * @param {number} maxMessageBytes largest message payload allowed (the room's MAX_FRAME_BYTES)
 */
export function createFrameGuard(maxMessageBytes) {
  /** Header bytes of the frame being read, until it is complete. */
  let header = Buffer.alloc(0);
  let payloadLeft = 0;
  let messageBytes = 0;

  /** Consumes a frame header at the start of `header`; false when the frame is refused. */
  const frameAllowed = () => {
    const b0 = header[0] ?? 0;
    const b1 = header[1] ?? 0;
    const opcode = b0 & 0x0f;
    const fin = (b0 & 0x80) !== 0;
    const short = b1 & 0x7f;
    let length = short;
    if (short === 126) length = header.readUInt16BE(2);
    else if (short === 127) {
      const high = header.readUInt32BE(2);
      // Past 2^53 a length is not even a number here; no limit allows it.
      if (high >= 0x200000) return false;
      length = high * 2 ** 32 + header.readUInt32BE(6);
    }
    // A control frame (close, ping, pong) may come between the fragments of a
    // message; its payload is skipped like any other, or its (masked, random)
    // bytes would be read as the next frame's header.
    payloadLeft = length;
    if (opcode >= 8) return length <= 125;
    if (opcode !== 0) messageBytes = 0;
    messageBytes += length;
    if (messageBytes > maxMessageBytes) return false;
    if (fin) messageBytes = 0;
    return true;
  };

  /** Bytes a complete header of this frame takes, once its first two are known. */
  const headerLength = () => {
    const b1 = header[1] ?? 0;
    const short = b1 & 0x7f;
    return 2 + (short === 126 ? 2 : short === 127 ? 8 : 0) + ((b1 & 0x80) !== 0 ? 4 : 0);
  };

  return {
    /**
     * Follows `chunk`; false when it carries (the start of) a message over the
     * limit, and the connection should be closed instead of forwarding it.
     * @param {Buffer} chunk
     */
    feed(chunk) {
      let i = 0;
      while (i < chunk.length) {
        if (payloadLeft > 0) {
          const take = Math.min(payloadLeft, chunk.length - i);
          payloadLeft -= take;
          i += take;
          continue;
        }
        const need = header.length < 2 ? 2 : headerLength();
        const take = Math.min(need - header.length, chunk.length - i);
        header = Buffer.concat([header, chunk.subarray(i, i + take)]);
        i += take;
        if (header.length < 2 || header.length < headerLength()) continue;
        if (!frameAllowed()) return false;
        header = Buffer.alloc(0);
      }
      return true;
    },
  };
}

/** The close frame the gate answers an oversized message with (server frames are not masked). @param {number} maxMessageBytes */
export function tooBigCloseFrame(maxMessageBytes) {
  const reason = Buffer.from(`message over ${maxMessageBytes} bytes`);
  const frame = Buffer.alloc(4 + reason.length);
  frame[0] = 0x88;
  frame[1] = 2 + reason.length;
  frame.writeUInt16BE(CLOSE_TOO_BIG, 2);
  reason.copy(frame, 4);
  return frame;
}
