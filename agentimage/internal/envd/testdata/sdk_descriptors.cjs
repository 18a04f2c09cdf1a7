// Prints, as JSON, the protobuf file descriptors the installed npm e2b SDK compiled in for envd (its generated
// envd/process/process_pb.ts and envd/filesystem/filesystem_pb.ts, bundled into dist/index.mjs as
// fileDesc("<base64 FileDescriptorProto>", [imported files]) calls): {"version": "<e2b version>", "files":
// {"<proto path>": {"desc": "<base64, unpadded>", "imports": ["<proto path>", ...]}}}. protobuf-es leaves the
// imports out of the embedded bytes and passes them as the second argument, so they are resolved here (they are
// well-known types from @bufbuild/protobuf/wkt).
// wire_contract_test.go compares them with the descriptors generated from our spec/*.proto.
// The SDK is located through require.resolve, so NODE_PATH must name the node_modules holding e2b.
'use strict';
const fs = require('fs');
const path = require('path');

const main = require.resolve('e2b');
const dist = path.join(path.dirname(main), 'index.mjs');
const src = fs.readFileSync(dist, 'utf8');
const version = JSON.parse(fs.readFileSync(path.join(path.dirname(main), '..', 'package.json'), 'utf8')).version;

const wkt = require(require.resolve('@bufbuild/protobuf/wkt', { paths: [path.dirname(main)] }));

const out = {};
for (const m of src.matchAll(/fileDesc\(\s*"([A-Za-z0-9+/=]+)"\s*(?:,\s*\[([^\]]*)\])?/g)) {
  const bytes = Buffer.from(m[1], 'base64');
  // A FileDescriptorProto starts with field 1 (name, length-delimited): tag 0x0a, a one-byte length, the name.
  if (bytes[0] !== 0x0a || bytes[1] > 127) continue;
  const name = bytes.subarray(2, 2 + bytes[1]).toString('utf8');
  const imports = (m[2] || '').split(',').map((s) => s.trim()).filter(Boolean).map((id) => {
    const file = wkt[id];
    if (!file || !file.proto || !file.proto.name) throw new Error(`${name}: cannot resolve import ${id}`);
    return file.proto.name;
  });
  out[name] = { desc: m[1], imports };
}
process.stdout.write(JSON.stringify({ version, files: out }));
