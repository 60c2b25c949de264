// Validates the custom resources of deploy/ against pinned CRD schemas, from npm packages (see
// package.json; versions pinned in package-lock.json):
//   - @kubernetes-models/istio 3.0.1: generated from Istio 1.29.2's CRDs (manifests/charts/base/
//     files/crd-all.gen.yaml): WasmPlugin, EnvoyFilter, VirtualService, RequestAuthentication.
//   - @kubernetes-models/envoy-gateway 2.0.0: generated from Envoy Gateway's Go API
//     (gateway.envoyproxy.io/v1alpha1): EnvoyProxy, EnvoyExtensionPolicy, BackendTrafficPolicy,
//     EnvoyPatchPolicy, ClientTrafficPolicy, SecurityPolicy.
//   - @kubernetes-models/gateway-api 2.0.0: Gateway API (gateway.networking.k8s.io/v1): Gateway,
//     HTTPRoute.
// Two checks per resource:
//   1. the package's compiled OpenAPI schema (types, enums, patterns, required fields): `validate()`;
//   2. unknown fields: the manifest as a TypeScript object literal typed with the package's
//      interface, compiled by tsc (excess property checks at every level), since the compiled
//      schemas accept unknown fields.
// Kubernetes core kinds and Kustomization are not handled here (tests/py/test_deploy_manifests.py
// validates core kinds with kubernetes-validate). Usage: node validate.mjs FILE.yaml...
// Prints one line per resource; exits 1 if any failed, 2 if a kind is not known here.
import { readFileSync, mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import ts from "typescript";

const here = dirname(fileURLToPath(import.meta.url));
const MODELS = {
  "extensions.istio.io/v1alpha1": "@kubernetes-models/istio/extensions.istio.io/v1alpha1",
  "networking.istio.io/v1alpha3": "@kubernetes-models/istio/networking.istio.io/v1alpha3",
  "networking.istio.io/v1": "@kubernetes-models/istio/networking.istio.io/v1",
  "security.istio.io/v1": "@kubernetes-models/istio/security.istio.io/v1",
  "gateway.envoyproxy.io/v1alpha1": "@kubernetes-models/envoy-gateway/gateway.envoyproxy.io/v1alpha1",
  "gateway.networking.k8s.io/v1": "@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1",
};

const docs = [];
for (const file of process.argv.slice(2)) {
  for (const d of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (d.errors.length) {
      console.log(`FAIL ${file}: YAML: ${d.errors.map((e) => e.message).join("; ")}`);
      process.exitCode = 1;
      continue;
    }
    const obj = d.toJS();
    if (obj) docs.push({ file, obj });
  }
}

let failed = 0;
let unknownKind = 0;
const typed = [];
for (const { file, obj } of docs) {
  const where = `${file} ${obj.kind}/${obj.metadata?.name}`;
  const base = MODELS[obj.apiVersion];
  if (!base) {
    console.log(`UNKNOWN ${where}: ${obj.apiVersion} is not a custom resource group handled here`);
    unknownKind++;
    continue;
  }
  const mod = `${base}/${obj.kind}`;
  let Model;
  try {
    Model = (await import(mod))[obj.kind];
  } catch (e) {
    console.log(`UNKNOWN ${where}: no model ${mod} (${e.message})`);
    unknownKind++;
    continue;
  }
  try {
    new Model(obj).validate();
  } catch (e) {
    const details = (e.errors || []).map((x) => `${x.instancePath || "/"} ${x.message}`).join("; ");
    console.log(`FAIL ${where}: schema: ${details || e.message}`);
    failed++;
    continue;
  }
  typed.push({ where, mod, kind: obj.kind, obj });
}

// Unknown fields: one TypeScript file, one typed constant per resource.
if (typed.length) {
  const dir = mkdtempSync(join(here, ".check-"));
  try {
    let text = typed.map((t, i) => `import type { I${t.kind} as T${i} } from "${t.mod}";\n`).join("");
    const starts = []; // first line (1-based) of each resource's constant
    typed.forEach((t, i) => {
      starts.push(text.split("\n").length);
      text += `export const d${i}: T${i} = ${JSON.stringify(t.obj, null, 1)};\n`;
    });
    const file = join(dir, "check.ts");
    writeFileSync(file, text);
    const program = ts.createProgram([file], {
      noEmit: true, strict: true, skipLibCheck: true, target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext,
    });
    const diags = ts.getPreEmitDiagnostics(program).filter((d) => d.file && d.file.fileName === file);
    const bad = new Map();
    for (const d of diags) {
      const { line } = d.file.getLineAndCharacterOfPosition(d.start);
      let idx = starts.findLastIndex((s) => s <= line + 1);
      if (idx < 0) idx = 0;
      const msg = ts.flattenDiagnosticMessageText(d.messageText, " ");
      bad.set(idx, [...(bad.get(idx) || []), msg]);
    }
    const global = ts.getPreEmitDiagnostics(program).filter((d) => !d.file || d.file.fileName !== file);
    for (const d of global.filter((d) => d.category === ts.DiagnosticCategory.Error)) {
      console.log(`FAIL tsc: ${ts.flattenDiagnosticMessageText(d.messageText, " ")}`);
      failed++;
    }
    typed.forEach((t, i) => {
      if (bad.has(i)) {
        console.log(`FAIL ${t.where}: fields: ${bad.get(i).join("; ")}`);
        failed++;
      } else {
        console.log(`ok   ${t.where}`);
      }
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(`deploy-validate: ${docs.length - failed - unknownKind} of ${docs.length} resources valid`);
process.exitCode = failed ? 1 : unknownKind ? 2 : (process.exitCode || 0);
