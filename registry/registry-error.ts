/**
 * The registry files of an older release, read once to copy them into the registry
 * bucket, hold something a start cannot use: a snapshot that is not JSON, of
 * another version or without its record lists, or a damaged change with changes after
 * it. Restarting would find the same bytes, so the process stops for an operator
 * (service/main.ts exits EX_DATAERR, which the systemd unit does not restart) instead of
 * starting on a registry that has lost acknowledged changes.
 */
export class RegistryError extends Error {
  readonly code = 'registry_corrupt'
  override readonly name = 'RegistryError'
}
