#!/usr/bin/env node
// Checks exchanges recorded by ephemera's GitHub simulator against GitHub's published
// OpenAPI description (the pinned @octokit/openapi package, api.github.com).
//
// For every exchange (one JSON object a line: method, path, query, request_body,
// status, response_body, ratelimit_resource; see tests/src/sim/intercept.rs):
//   - the path matches a route of the description (the most specific template wins,
//     as in GitHub's router), and its path parameters fit their schemas;
//   - the route has that method;
//   - every query parameter is one the operation declares, with a value of its type;
//   - the request body matches the operation's requestBody schema (and there is no
//     body where the operation takes none, and one where it requires one);
//   - the response body matches the schema documented for that status; a status the
//     operation does not document must be an error (4xx/5xx) with GitHub's
//     `basic-error` body, and a documented status without content must have no body;
//   - the bucket its `x-ratelimit-resource` names is one `GET /rate_limit` lists
//     (`rate-limit-overview`'s resources).
// The simulator's own /_sim/* control routes are exempt.
//
// Usage: node check.mjs [--each-must-fail] FILE_OR_DIR...
//   Directories are read for *.jsonl. Exits 0 when every exchange conforms.
//   --each-must-fail inverts the check for fixtures of known-bad exchanges: it exits 0
//   only when every single exchange is rejected.

import Ajv from "ajv";
import addFormats from "ajv-formats";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const SPEC_FILE = require.resolve("@octokit/openapi/generated/api.github.com.json");
const SPEC_VERSION = require("@octokit/openapi/package.json").version;
const METHODS = ["get", "put", "post", "patch", "delete", "head", "options"];

// ---------------------------------------------------------------- the description

/** OpenAPI 3.0 `nullable: true` is JSON Schema's "or null": wrap every such schema. */
function convertNullable(node) {
  if (Array.isArray(node)) return node.map(convertNullable);
  if (node === null || typeof node !== "object") return node;
  const out = {};
  for (const [key, value] of Object.entries(node)) out[key] = convertNullable(value);
  if (out.nullable === true) {
    delete out.nullable;
    return { anyOf: [{ type: "null" }, out] };
  }
  delete out.nullable;
  return out;
}

/** Internal references point into the `gh` schema registered with Ajv. */
function rebase(node) {
  if (Array.isArray(node)) return node.map(rebase);
  if (node === null || typeof node !== "object") return node;
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    out[key] = key === "$ref" && typeof value === "string" && value.startsWith("#/")
      ? `gh${value}`
      : rebase(value);
  }
  return out;
}

/**
 * Errata of the description, each a place where no answer of GitHub's could conform:
 * `GET /app/installations` inlines the installation with `account: allOf [simple-user,
 * enterprise]` (an account that is both a user and an enterprise), where the
 * `installation` component it copies, and `GET /orgs/{org}/installation` with it, says
 * `anyOf`. Its items are checked against that component.
 */
function applyErrata(spec) {
  const list = spec.paths["/app/installations"]?.get?.responses?.["200"]?.content?.["application/json"];
  const account = list?.schema?.items?.properties?.account;
  if (account?.allOf && spec.components.schemas.installation) {
    list.schema.items = { $ref: "#/components/schemas/installation" };
  }
}

function load() {
  const spec = JSON.parse(readFileSync(SPEC_FILE, "utf8"));
  applyErrata(spec);
  spec.components = convertNullable(spec.components);
  spec.paths = convertNullable(spec.paths);
  const ajv = new Ajv({ strict: false, allErrors: true, logger: false });
  addFormats(ajv);
  for (const format of ["repo.nwo", "timestamp", "int32", "int64", "double"]) {
    if (!ajv.formats[format]) ajv.addFormat(format, true);
  }
  ajv.addSchema({ $id: "gh", components: spec.components });
  const routes = Object.entries(spec.paths).map(([template, item]) => {
    const segments = template.split("/");
    const literals = segments.filter((s) => !s.startsWith("{")).length;
    const names = segments.filter((s) => s.startsWith("{")).map((s) => s.slice(1, -1));
    const pattern = segments
      .map((s) => (s.startsWith("{") ? "([^/]+)" : s.replace(/[.*+?^$()|[\]\\]/g, "\\$&")))
      .join("/");
    return { template, item, literals, names, regex: new RegExp(`^${pattern}$`) };
  });
  return { spec, ajv, routes, compiled: new Map() };
}

/** Follows a local `$ref` (`#/components/...`) in the description. */
function deref(spec, node) {
  let current = node;
  for (let hops = 0; current && current.$ref && hops < 10; hops += 1) {
    const pointer = current.$ref.replace(/^#\//, "").split("/");
    current = pointer.reduce(
      (at, part) => at?.[part.replace(/~1/g, "/").replace(/~0/g, "~")],
      spec,
    );
  }
  return current;
}

function validator(ctx, key, schema) {
  if (!ctx.compiled.has(key)) ctx.compiled.set(key, ctx.ajv.compile(rebase(schema)));
  return ctx.compiled.get(key);
}

function schemaErrors(ctx, key, schema, value) {
  const validate = validator(ctx, key, schema);
  if (validate(value)) return [];
  return validate.errors
    .slice(0, 10)
    .map((e) => `${e.instancePath || "(body)"} ${e.message}${e.params?.additionalProperty ? ` (${e.params.additionalProperty})` : ""}`);
}

// ---------------------------------------------------------------- one exchange

function jsonSchemaOf(spec, holder) {
  const content = deref(spec, holder)?.content;
  if (!content) return undefined;
  const json = content["application/json"] ?? Object.entries(content).find(([t]) => t.includes("json"))?.[1];
  return json?.schema ?? {};
}

/** Does `value` (a string from a URL) fit a parameter's schema? */
function fitsParameter(schema, value) {
  const type = schema?.type ?? schema?.anyOf?.find((s) => s.type !== "null")?.type;
  if (type === "integer") return /^-?\d+$/.test(value);
  if (type === "number") return value.trim() !== "" && !Number.isNaN(Number(value));
  if (type === "boolean") return value === "true" || value === "false";
  if (schema?.enum) return schema.enum.includes(value);
  return true;
}

function checkExchange(ctx, x) {
  const { spec } = ctx;
  const errors = [];
  const method = String(x.method ?? "").toLowerCase();
  const matches = ctx.routes
    .map((route) => ({ route, found: route.regex.exec(x.path ?? "") }))
    .filter((m) => m.found);
  if (matches.length === 0) return { errors: [`no route of the description matches ${x.path}`] };
  const best = Math.max(...matches.map((m) => m.route.literals));
  const { route, found } = matches.find((m) => m.route.literals === best);
  const op = route.item[method];
  if (!METHODS.includes(method) || !op) {
    const allowed = METHODS.filter((m) => route.item[m]).map((m) => m.toUpperCase());
    return { route, errors: [`${route.template} has no ${x.method} (it has ${allowed.join(", ")})`] };
  }
  const opKey = `${method.toUpperCase()} ${route.template}`;
  const parameters = [...(route.item.parameters ?? []), ...(op.parameters ?? [])].map((p) => deref(spec, p));

  route.names.forEach((name, i) => {
    const declared = parameters.find((p) => p.in === "path" && p.name === name);
    const value = decodeURIComponent(found[i + 1]);
    if (!declared) errors.push(`path parameter ${name} is not declared`);
    else if (!fitsParameter(declared.schema, value)) {
      errors.push(`path parameter ${name}=${JSON.stringify(value)} does not fit ${JSON.stringify(declared.schema)}`);
    }
  });

  for (const [name, value] of new URLSearchParams(x.query ?? "")) {
    const declared = parameters.find((p) => p.in === "query" && p.name === name);
    if (!declared) errors.push(`query parameter ${name} is not declared for ${opKey}`);
    else if (!fitsParameter(declared.schema, value)) {
      errors.push(`query parameter ${name}=${JSON.stringify(value)} does not fit ${JSON.stringify(declared.schema)}`);
    }
  }

  const requestBody = deref(spec, op.requestBody);
  const hasBody = x.request_body !== null && x.request_body !== undefined;
  if (hasBody && !requestBody) errors.push(`${opKey} takes no request body`);
  if (!hasBody && requestBody?.required) errors.push(`${opKey} requires a request body`);
  if (hasBody && requestBody) {
    const schema = jsonSchemaOf(spec, requestBody);
    if (schema === undefined) errors.push(`${opKey} takes no JSON request body`);
    else errors.push(...schemaErrors(ctx, `${opKey} request`, schema, x.request_body).map((e) => `request ${e}`));
  }

  // The bucket an answer names must be one GitHub lists in `GET /rate_limit`'s
  // `rate-limit-overview`, and a spent bucket (403/429 with none left) must name one.
  const buckets = Object.keys(spec.components.schemas["rate-limit-overview"].properties.resources.properties);
  if (x.ratelimit_resource !== undefined && x.ratelimit_resource !== null && !buckets.includes(x.ratelimit_resource)) {
    errors.push(`x-ratelimit-resource ${JSON.stringify(x.ratelimit_resource)} is no bucket of rate-limit-overview (${buckets.join(", ")})`);
  }
  if (x.fault === "bucket_spent" && !buckets.includes(x.ratelimit_resource)) {
    errors.push("a spent bucket's answer names no bucket in x-ratelimit-resource");
  }

  const status = String(x.status);
  const documented = deref(spec, op.responses?.[status]);
  const hasResponseBody = x.response_body !== null && x.response_body !== undefined;
  if (documented) {
    const schema = jsonSchemaOf(spec, documented);
    if (schema === undefined && hasResponseBody) errors.push(`${opKey} ${status} has no documented body`);
    if (schema !== undefined) {
      errors.push(
        ...schemaErrors(ctx, `${opKey} ${status}`, schema, x.response_body).map((e) => `response ${status} ${e}`),
      );
    }
  } else if (status === "304" && x.method === "GET" && !hasResponseBody) {
    // A conditional GET (If-None-Match) whose resource did not change: GitHub documents it
    // for the API as a whole, not per operation ("Best practices for using the REST API",
    // https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate).
  } else if (Number(status) >= 400) {
    const basic = spec.components.schemas["basic-error"];
    errors.push(...schemaErrors(ctx, "basic-error", basic, x.response_body).map((e) => `error body ${e}`));
  } else {
    errors.push(`${opKey} does not document status ${status}`);
  }
  return { route, opKey, documented: Boolean(documented), errors };
}

// ---------------------------------------------------------------- files and report

function files(args) {
  return args.flatMap((arg) =>
    statSync(arg).isDirectory()
      ? readdirSync(arg).filter((f) => f.endsWith(".jsonl")).sort().map((f) => join(arg, f))
      : [arg],
  );
}

function main() {
  const args = process.argv.slice(2);
  const eachMustFail = args.includes("--each-must-fail");
  const inputs = files(args.filter((a) => !a.startsWith("--")));
  if (inputs.length === 0) {
    console.error("usage: node check.mjs [--each-must-fail] FILE_OR_DIR...");
    return 2;
  }
  const ctx = load();
  const coverage = new Map();
  let checked = 0;
  let exempt = 0;
  let failed = 0;
  let accepted = 0;
  for (const file of inputs) {
    readFileSync(file, "utf8").split("\n").forEach((line, index) => {
      if (!line.trim()) return;
      const where = `${file}:${index + 1}`;
      let exchange;
      try {
        exchange = JSON.parse(line);
      } catch {
        console.error(`${where}: not JSON`);
        failed += 1;
        return;
      }
      if (String(exchange.path ?? "").startsWith("/_sim/")) {
        exempt += 1;
        return;
      }
      checked += 1;
      const result = checkExchange(ctx, exchange);
      const label = `${exchange.method} ${exchange.path}${exchange.query ? `?${exchange.query}` : ""} -> ${exchange.status}`;
      if (result.opKey) {
        const seen = coverage.get(result.opKey) ?? new Set();
        seen.add(`${exchange.status}${result.documented ? "" : "*"}`);
        coverage.set(result.opKey, seen);
      }
      if (result.errors.length > 0) {
        failed += 1;
        if (eachMustFail) console.log(`rejected as expected  ${label}\n    ${result.errors[0]}`);
        else console.error(`${where}: ${label}\n    ${result.errors.join("\n    ")}`);
      } else {
        accepted += 1;
        if (eachMustFail) console.error(`${where}: ACCEPTED, but it is a bad exchange: ${label}`);
      }
    });
  }
  console.log(`@octokit/openapi ${SPEC_VERSION} (api.github.com): ${checked} exchanges checked, ${exempt} /_sim exempt`);
  if (eachMustFail) {
    console.log(`${failed} rejected, ${accepted} wrongly accepted`);
    return accepted === 0 && failed > 0 ? 0 : 1;
  }
  for (const [op, statuses] of [...coverage].sort()) {
    console.log(`  ${op.padEnd(62)} ${[...statuses].sort().join(" ")}`);
  }
  console.log("  (* = status not documented for the operation; checked as GitHub's basic-error)");
  if (checked === 0) {
    console.error("no exchanges were recorded: nothing was checked");
    return 1;
  }
  console.log(failed === 0 ? "conformance: ok" : `conformance: ${failed} exchanges do not conform`);
  return failed === 0 ? 0 : 1;
}

process.exitCode = main();
