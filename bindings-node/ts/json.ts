/**
 * JSON between the native module and JavaScript, keeping what JSON.parse alone loses.
 *
 * JavaScript has one number type, so `1` and `1.0` both read as the number 1 (and `-0.0` as -0):
 * their kind, a number, is kept. An integer past 2^53 is the one a plain `JSON.parse` changes
 * (`9007199254740993` reads as ...992), so where the engine lets a reviver see a value's source
 * text (Node 21 and later), such an integer is read as a `bigint` instead, exact. `stringifyJson`
 * writes a `bigint` back as the integer it is. On Node 20 both behave as `JSON.parse` and
 * `JSON.stringify` do (a `bigint` is written as the nearest number).
 */

type Reviver = (key: string, value: unknown, context?: { source?: string }) => unknown;

/** Whether `JSON.parse` hands a reviver the source text of each value (Node 21+). */
const SOURCE_TEXT: boolean = (() => {
  let seen: string | undefined;
  const reviver: Reviver = (_key, value, context) => {
    seen = context?.source;
    return value;
  };
  JSON.parse("1", reviver as Parameters<typeof JSON.parse>[1]);
  return seen === "1";
})();

const WHOLE = /^-?\d+$/;

const exactIntegers: Reviver = (_key, value, context) => {
  if (typeof value === "number" && !Number.isSafeInteger(value) && context?.source !== undefined && WHOLE.test(context.source)) {
    return BigInt(context.source);
  }
  return value;
};

/** `JSON.parse`, with integers past 2^53 read as exact `bigint`s where the engine allows. */
export function parseJson<T = unknown>(text: string): T {
  // Every integer past 2^53 has 16 digits or more: text without such a run parses as usual.
  if (!SOURCE_TEXT || !/\d{16}/.test(text)) {
    return JSON.parse(text) as T;
  }
  return JSON.parse(text, exactIntegers as Parameters<typeof JSON.parse>[1]) as T;
}

const rawJSON = (JSON as { rawJSON?: (text: string) => unknown }).rawJSON;

/** `JSON.stringify`, writing a `bigint` as the integer it is (where the engine allows). */
export function stringifyJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === "bigint") {
      return rawJSON !== undefined ? rawJSON(v.toString()) : Number(v);
    }
    return v;
  });
}
