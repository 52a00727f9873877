export class LogError extends Error {
    code;
    constructor(code, message, options) {
        super(message, options);
        this.name = 'LogError';
        this.code = code;
    }
}
export function isLogError(err, code) {
    return err instanceof LogError && (code === undefined || err.code === code);
}
/** Wraps a file-system failure at the adapter edge so nothing above matches on errno text. */
export function ioError(what, cause) {
    if (cause instanceof LogError)
        return cause;
    return new LogError('log_io', `signal log: ${what} failed`, { cause });
}
//# sourceMappingURL=log-error.js.map