// Shared by the unit and the integration tests.

/**
 * Runs `fn` with the environment variables set (undefined unsets one) and
 * restores them afterwards, also when it throws or rejects.
 */
export async function withEnv(vars, fn) {
  const saved = Object.fromEntries(Object.keys(vars).map((name) => [name, process.env[name]]));
  const apply = (values) => {
    for (const [name, value] of Object.entries(values)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
  apply(vars);
  try {
    return await fn();
  } finally {
    apply(saved);
  }
}
