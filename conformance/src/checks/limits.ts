import { randomUUID } from "node:crypto";
import { expect, skip, sleep, type Check } from "../check.js";

/**
 * G12: the message limit is exact and announced. Data whose stored JSON text
 * is exactly `maxMessageBytes` (the welcome's) is accepted over HTTP and over
 * a socket and delivered; one byte more is refused (413 `too_large` over
 * HTTP, an `error` `too_large` with the publish's id over a socket, which
 * stays open), and nothing of it is stored.
 */
export const messageSize: Check = {
  id: "G12.message-size",
  clause: "G12 limits",
  title: "a message at the size limit is accepted, one byte over is refused (413 / error too_large, socket kept)",
  timeoutMs: 20_000,
  needsSockets: true,
  needsPublishKey: true,
  async run(ctx) {
    const limit = ctx.facts.maxMessageBytes;
    if (limit === null) skip("no socket could be opened to learn the message limit");
    const room = ctx.room("");
    const reader = await ctx.openRoom(room);
    const publisher = await ctx.openRoom(room);
    await publisher.waitForWelcome();
    // A text body is stored as a JSON string: its quotes are two of the bytes.
    const atLimit = "x".repeat(limit - 2);
    const ok = await ctx.service.publish(room, undefined, { body: atLimit, contentType: "text/plain" });
    expect(ok.status === 200 && ok.json?.seq === 1, `a message of exactly ${limit} B as JSON answered ${ok.status} ${ok.text.slice(0, 120)}`);
    const over = await ctx.service.publish(room, undefined, { body: `${atLimit}x`, contentType: "text/plain" });
    expect(over.status === 413 && over.isJson && (over.json as { error?: string } | undefined)?.error === "too_large", `a message of ${limit + 1} B as JSON answered ${over.status} ${over.text.slice(0, 120)}, expected 413 too_large`);
    const answer = (id: string) => publisher.events.find((e) => (e.type === "published" || e.type === "error") && "id" in e && e.id === id);
    const okId = `at-${randomUUID().slice(0, 8)}`;
    const overId = `over-${randomUUID().slice(0, 8)}`;
    publisher.send({ type: "publish", data: atLimit, id: okId });
    await publisher.waitFor(() => answer(okId) !== undefined, 10_000, "the answer to the publish at the limit");
    const accepted = answer(okId)!;
    expect(accepted.type === "published" && accepted.seq === 2, `a socket publish of exactly ${limit} B was answered ${JSON.stringify(accepted).slice(0, 120)}`);
    publisher.send({ type: "publish", data: `${atLimit}x`, id: overId });
    await publisher.waitFor(() => answer(overId) !== undefined || publisher.closeInfo !== null, 10_000, "the answer to the publish one byte over");
    const refusal = answer(overId);
    expect(refusal?.type === "error" && refusal.code === "too_large", `a socket publish of ${limit + 1} B was answered ${JSON.stringify(refusal)?.slice(0, 120)}${publisher.closeInfo ? `, and the socket closed ${publisher.closeInfo.code}` : ""}`);
    publisher.send({ type: "publish", data: "after", id: "after" });
    await publisher.waitFor(() => answer("after") !== undefined || publisher.closeInfo !== null, 10_000, "the answer to a publish after the refusal");
    const after = answer("after");
    expect(publisher.closeInfo === null && after?.type === "published" && after.seq === 3, `after the refusal the socket ${publisher.closeInfo ? `closed ${publisher.closeInfo.code}` : `answered ${JSON.stringify(after)}`}`);
    await reader.waitForMessages(3, 10_000);
    await sleep(100);
    const got = reader.messages().map((m) => `${m.seq}:${typeof m.data === "string" ? m.data.length + 2 : "?"}`);
    expect(got.join(" ") === `1:${limit} 2:${limit} 3:7`, `the reader got ${got.join(" ")} (seq:bytes), expected 1:${limit} 2:${limit} 3:7`);
    return `limit ${limit} B: HTTP at it 200, +1 B 413 too_large; socket at it published, +1 B error too_large with its id and the socket kept publishing; the reader got only the 3 accepted`;
  },
};
