// The CommonJS declarations resolve and type the same surface.

import tocsinModule = require("@tocsin/client");

const tocsin = new tocsinModule.Tocsin("key", { maxRetries: 1 });

export async function usage(): Promise<string> {
  try {
    const res = await tocsin.events.create({ channelName: "c", title: "t" });
    return res.data.id;
  } catch (error) {
    if (error instanceof tocsinModule.RateLimitError) return String(error.rateLimit.resetIn);
    if (error instanceof tocsinModule.ApiError) return String(error.statusCode);
    throw error;
  }
}
