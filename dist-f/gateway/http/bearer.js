const BEARER = /^Bearer ([\x21-\x7e]{1,256})$/;
/** The principal of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerPrincipal(registry, authorization) {
    const match = BEARER.exec(authorization);
    return match === null ? undefined : registry.authenticate(match[1]);
}
//# sourceMappingURL=bearer.js.map