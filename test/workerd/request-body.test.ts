import { describe, expect, it } from "vitest";
import { readBody, type BodyLimits } from "../../worker/request-body";

/** A body that sends `chunks` and then, unless `end`, never finishes. */
function streamed(chunks: string[], end: boolean): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      if (end) controller.close();
    },
  });
}

const post = (body: ReadableStream<Uint8Array>, declared: number | null): Request =>
  new Request("http://fanout.test/rooms/r/publish", {
    method: "POST",
    body,
    headers: declared === null ? {} : { "content-length": String(declared) },
  });

const limits: BodyLimits = { maxBytes: 16, drainBytes: 64, deadlineMs: 100 };

describe("readBody", () => {
  it("reads a body declared within the limit whole, and one without a length through the reader", async () => {
    for (const declared of [10, null]) {
      const read = await readBody(post(streamed(["hello", "world"], true), declared), limits);
      expect(read.ok && new TextDecoder().decode(read.bytes)).toBe("helloworld");
    }
  });

  it("answers 408 when a body declared within the limit stops arriving, as one without a length", async () => {
    for (const declared of [10, null]) {
      const read = await readBody(post(streamed(["hel"], false), declared), limits);
      expect(read).toMatchObject({ ok: false, status: 408 });
    }
  });

  it("refuses a body longer than the limit whatever its header claimed", async () => {
    for (const declared of [10, null]) {
      const read = await readBody(post(streamed(["0123456789", "0123456789"], true), declared), limits);
      expect(read).toMatchObject({ ok: false, status: 413, error: "too_large" });
    }
  });
});
