import { Compile } from 'typebox/compile';
function fieldName(instancePath, root) {
    return instancePath === '' ? root : instancePath.slice(1).replaceAll('/', '.');
}
/**
 * Turns the validator's error list into one sentence a client can act on: the first
 * bad field by name and what it must be. Unions of literals are reported as "one of",
 * closed objects as "unknown field", because the raw messages ("schema is false",
 * "must be equal to constant") name neither.
 */
function describe(errors, root) {
    const first = errors[0];
    if (first === undefined)
        return `${root} is invalid`;
    const field = fieldName(first.instancePath, root);
    if (first.keyword === 'boolean' && first.schemaPath.endsWith('/additionalProperties')) {
        return `unknown field ${field}`;
    }
    if (first.keyword === 'const') {
        const allowed = errors
            .filter((e) => e.keyword === 'const' && e.instancePath === first.instancePath)
            .map((e) => JSON.stringify(e.params['allowedValue']));
        return `${field} must be ${allowed.length > 1 ? `one of ${allowed.join(', ')}` : allowed[0]}`;
    }
    if (first.keyword === 'required') {
        const missing = first.params['requiredProperties']?.[0];
        return missing === undefined ? `${field} lacks a required field` : `${fieldName(`${first.instancePath}/${missing}`, root)} is required`;
    }
    return `${field} ${first.message}`;
}
/** Compiles `schema` once and returns a checker whose failures name the field. */
export function compileCheck(schema, root) {
    const compiled = Compile(schema);
    return (value) => compiled.Check(value)
        ? { ok: true, value: value }
        : { ok: false, problem: describe([...compiled.Errors(value)], root) };
}
//# sourceMappingURL=schema-problem.js.map