// The base class of RPC-capable Durable Objects, as workerd provides it
// (`cloudflare:workers`), declared for the load tool's type check, which does
// not load Cloudflare's types. Only what the bare room uses.
declare module "cloudflare:workers" {
  export abstract class DurableObject<Env = unknown> {
    protected ctx: import("./runtime").DurableObjectState;
    protected env: Env;
    constructor(ctx: import("./runtime").DurableObjectState, env: Env);
  }
}
