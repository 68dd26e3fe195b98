// A test host for MCP Apps views, built on @modelcontextprotocol/ext-apps's AppBridge (bundled by
// scripts/apps_host into .apps-host/host.js; tests/end_to_end/test_apps_browser.py serves it).
//
// It connects to the live server (same origin, /mcp) with the official TypeScript client, declaring the
// extension; reads the tool's ui:// resource; loads the document into a sandboxed iframe (scripts only, an
// opaque origin) under the CSP the server declared; delivers the tool's input and result through the
// bridge, which forwards the view's tools/call to the server. window.hostState tells the test how far it got.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { AppBridge, PostMessageTransport, getToolUiResourceUri } from "@modelcontextprotocol/ext-apps/app-bridge";

const MIME = "text/html;profile=mcp-app";
const state = (window.hostState = { step: "starting", viewCalls: [], csp: null, error: null });

function policy(csp) {
  const resources = (csp.resourceDomains || []).join(" ");
  const connect = (csp.connectDomains || []).join(" ");
  return [
    "default-src 'none'",
    `script-src 'unsafe-inline' ${resources}`,
    `style-src 'unsafe-inline' ${resources}`,
    `img-src data: ${resources}`,
    `font-src ${resources}`,
    `media-src data: ${resources}`,
    `connect-src ${connect || "'none'"}`,
    `frame-src ${(csp.frameDomains || []).join(" ") || "'none'"}`,
    "object-src 'none'",
    `base-uri ${(csp.baseUriDomains || []).join(" ") || "'none'"}`,
  ].join("; ");
}

function withPolicy(html, csp) {
  const meta = `<meta http-equiv="Content-Security-Policy" content="${policy(csp).replaceAll('"', "&quot;")}">`;
  return html.replace(/<head[^>]*>/i, (head) => head + meta);
}

async function main() {
  const params = new URLSearchParams(location.search);
  const toolName = params.get("tool");
  const args = JSON.parse(params.get("arguments") || "{}");
  const client = new Client(
    { name: "apps-test-host", version: "1.0" },
    { capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [MIME] } } } },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", location.origin)));
  state.step = "connected";
  const { tools } = await client.listTools();
  state.tools = tools.map((tool) => tool.name);
  const tool = tools.find((t) => t.name === toolName);
  const uri = getToolUiResourceUri(tool);
  const read = await client.readResource({ uri });
  const [content] = read.contents;
  if (content.mimeType !== MIME) throw new Error(`unexpected MIME type ${content.mimeType}`);
  state.csp = content._meta?.ui?.csp || {};
  state.policy = policy(state.csp);

  const iframe = document.createElement("iframe");
  iframe.id = "view";
  iframe.setAttribute("sandbox", "allow-scripts");
  iframe.srcdoc = withPolicy(content.text, state.csp);
  document.getElementById("frame").appendChild(iframe);

  const bridge = new AppBridge(
    client,
    { name: "apps-test-host", version: "1.0" },
    { serverTools: {}, serverResources: {}, logging: {} },
  );
  bridge.addEventListener("sizechange", ({ height }) => {
    state.height = height;
    if (height) iframe.style.height = `${height}px`;
  });
  bridge.oninitialized = async () => {
    state.step = "initialized";
    await bridge.sendToolInput({ arguments: args });
    const result = await client.callTool({ name: toolName, arguments: args });
    await bridge.sendToolResult(result);
    state.step = "delivered";
  };
  window.addEventListener("message", (event) => {
    // What the view asks of the host (the bridge forwards a tools/call to the server through the client).
    if (event.source === iframe.contentWindow && event.data?.method === "tools/call") {
      state.viewCalls.push(event.data.params.name);
    }
  });
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
}

main().catch((error) => {
  state.step = "failed";
  state.error = String(error && error.stack ? error.stack : error);
});
