/** A setting is missing or wrong: the process exits with status 2 and this message, which names it. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}
