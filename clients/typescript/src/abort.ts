// The caller's AbortSignal: linking it to the controllers of requests, and
// waiting in a way it can cut short. Written by hand: AbortSignal.any is
// missing in Node 18.

import { AbortError } from "./errors.js";

/** Aborts `target` when `source` aborts (at once if it already has); returns the function that undoes the link. */
export function linkSignal(source: AbortSignal | undefined, target: AbortController): () => void {
  if (!source) return () => {};
  if (source.aborted) {
    target.abort(source.reason);
    return () => {};
  }
  const onAbort = () => target.abort(source.reason);
  source.addEventListener("abort", onAbort, { once: true });
  return () => source.removeEventListener("abort", onAbort);
}

/**
 * One signal that aborts when any of `signals` does; undefined when none is
 * given. Its listeners stay on the sources until one aborts, so it is for
 * signals that live as long as what they stop (a stream), not for a loop.
 */
export function anySignal(...signals: (AbortSignal | undefined)[]): AbortSignal | undefined {
  const given = signals.filter((signal): signal is AbortSignal => signal !== undefined);
  if (given.length <= 1) return given[0];
  const controller = new AbortController();
  for (const signal of given) linkSignal(signal, controller);
  return controller.signal;
}

/** The error a call aborted by `signal` rejects with. */
export function abortError(signal: AbortSignal): AbortError {
  return new AbortError({ cause: signal.reason });
}

/** Throws the call's {@link AbortError} when `signal` has aborted. */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortError(signal);
}

/**
 * Waits for `promise`, but rejects with an {@link AbortError} as soon as
 * `signal` aborts: a replaced `sleep` or a fetch that ignores its signal
 * cannot keep an aborted call waiting.
 */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(abortError(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortError(signal));
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
