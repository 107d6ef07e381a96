/**
 * The hook tests' worker: a HookedRoom that overrides every hook, each
 * behaving as its input asks (a query parameter of the upgrade, an `op` in
 * the message, a custom frame's type), so that one class can be driven
 * through every allow, deny, transform and failure path from outside.
 */
import { Hono } from "hono";
import {
  createFanoutApp,
  Room,
  type CustomClientFrame,
  type CloseInfo,
  type Connection,
  type ConnectDecision,
  type ConnectRequest,
  type FanoutEnv,
  type PublishDecision,
  type PublishRequest,
} from "../../worker/lib";
import { sleep } from "../helpers/wait";

export { Coordinator, RoomHub } from "../../worker/lib";

/** What the fixture attaches to a socket. */
export interface FixtureData {
  name: string;
  joinedAt: number;
  /** onClose throws for such a socket. */
  failOnClose?: boolean;
  note?: string;
}

export class HookedRoom extends Room<FanoutEnv, FixtureData> {
  protected override async onConnect(request: ConnectRequest): Promise<ConnectDecision<FixtureData>> {
    const query = new URL(request.request.url).searchParams;
    const deny = query.get("deny");
    if (deny === "forbidden" || deny === "unauthorized" || deny === "try_again_later") return { refuse: `denied: ${deny}`, code: deny };
    if (query.has("throw")) throw new Error("onConnect failed on purpose");
    if (query.has("badcode")) return { refuse: "a code that does not exist", code: "teapot" as "forbidden" };
    if (query.has("big")) return { data: { name: "big", joinedAt: 0, note: "x".repeat(5000) } };
    if (query.has("slow")) await sleep(Number(query.get("slow")));
    const name = query.get("name") ?? request.member?.id;
    if (!name) return query.has("listen") ? { canPublish: false } : undefined;
    const data: FixtureData = { name, joinedAt: Date.now() };
    if (query.has("failOnClose")) data.failOnClose = true;
    return { data, canPublish: !query.has("listen") };
  }

  protected override async beforePublish({ data, source }: PublishRequest<FixtureData>): Promise<PublishDecision> {
    if (typeof data !== "object" || data === null || !("op" in data)) return undefined;
    const message = data as { op: string; code?: "bad_request" | "forbidden" | "rate_limited"; ms?: number; bytes?: number };
    switch (message.op) {
      case "refuse":
        return message.code ? { refuse: "refused on purpose", code: message.code } : { refuse: "refused on purpose" };
      case "throw":
        throw new Error("beforePublish failed on purpose");
      case "transform":
        return { data: { ...data, by: source.kind, name: source.kind === "socket" ? (source.connection.data?.name ?? null) : null } };
      case "grow":
        return { data: "x".repeat(message.bytes ?? 70_000) };
      case "not-json":
        return { data: 10n };
      case "bad-shape":
        return "publish it" as unknown as PublishDecision;
      case "bad-code":
        return { refuse: "no", code: "nope" as "forbidden" };
      case "slow":
        await sleep(message.ms ?? 50);
        return undefined;
      default:
        return undefined;
    }
  }

  protected override async onClientFrame(connection: Connection<FixtureData>, frame: CustomClientFrame): Promise<void> {
    switch (frame.type) {
      case "x-echo":
        connection.send({ type: "x-echo", frame, data: connection.data, member: connection.member, canPublish: connection.canPublish });
        return;
      case "x-throw":
        throw new Error("onClientFrame failed on purpose");
      case "x-set":
        connection.setData(frame.data as FixtureData);
        connection.send({ type: "x-set", data: connection.data });
        return;
      case "x-mutate":
        // Data is frozen: changing it in place throws; setData is the way.
        (connection.data as { name: string }).name = "changed";
        return;
      case "x-impersonate":
        connection.send({ type: "message", seq: 999, data: "forged" } as unknown as { type: "x-never" });
        return;
      case "x-kick":
        connection.close(4003, "kicked by the room");
        return;
      case "x-announce": {
        const { seq } = await this.publishMessage({ from: connection.data?.name ?? null, text: frame.text ?? null });
        connection.send({ type: "x-announced", seq });
        return;
      }
      case "x-who":
        connection.send({ type: "x-who", ids: [...this.connections()].map((c) => c.data?.name ?? c.id).sort() });
        return;
      default:
        connection.send({ type: "x-unknown", got: frame.type });
    }
  }

  protected override async onClose(connection: Connection<FixtureData>, info: CloseInfo): Promise<void> {
    const data = connection.data;
    if (!data) return;
    if (data.failOnClose) throw new Error("onClose failed on purpose");
    // Tells the room who left, and how: the test sees it as a message.
    await this.publishMessage({ left: data.name, code: info.code, by: info.by, open: connection.open });
  }
}

const app = new Hono<{ Bindings: FanoutEnv }>();
app.get("/", (c) => c.text("the team's own worker"));
app.route("/fanout", createFanoutApp());

export default app;
