/* MCP Apps bridge (SEP-1865, 2026-01-26): a view's side of the host's JSON-RPC over postMessage.
 *
 *   const app = await McpApp.connect({ name: "book-cards", version: "1.0" });
 *   app.onToolInput = (args) => { ... };        // ui/notifications/tool-input
 *   app.onToolResult = (result) => { ... };     // ui/notifications/tool-result (a CallToolResult)
 *   const result = await app.callTool("reserve_copy", { book_id: 3 });   // tools/call through the host
 *
 * It talks to window.parent only (the host, or its sandbox proxy) and loads nothing: no network access
 * beyond what the document itself asks for. Shipped by django-mcp-ledger (mcp_server); inlined in a view by
 * {% mcp_app_bridge %} from the mcp_apps template tag library.
 */
(function (global) {
  "use strict";

  var PROTOCOL_VERSION = "2026-01-26";

  function McpApp(info) {
    this.info = info || { name: "django-view", version: "1.0" };
    this.nextId = 1;
    this.pending = {};
    this.hostContext = {};
    this.hostCapabilities = {};
    this.toolInput = null;
    this.toolResult = null;
    this.onToolInput = null;
    this.onToolInputPartial = null;
    this.onToolResult = null;
    this.onToolCancelled = null;
    this.onHostContextChanged = null;
    this.onTeardown = null;
    this._listener = this._receive.bind(this);
    global.addEventListener("message", this._listener);
  }

  McpApp.prototype._post = function (message) {
    message.jsonrpc = "2.0";
    global.parent.postMessage(message, "*");
  };

  McpApp.prototype.request = function (method, params) {
    var id = this.nextId++;
    var self = this;
    return new Promise(function (resolve, reject) {
      self.pending[id] = { resolve: resolve, reject: reject };
      self._post({ id: id, method: method, params: params || {} });
    });
  };

  McpApp.prototype.notify = function (method, params) {
    this._post({ method: method, params: params || {} });
  };

  McpApp.prototype._reply = function (id, result) {
    this._post({ id: id, result: result });
  };

  McpApp.prototype._call = function (handler, value) {
    if (typeof handler === "function") {
      try {
        handler(value);
      } catch (error) {
        if (global.console) global.console.error(error);
      }
    }
  };

  McpApp.prototype._receive = function (event) {
    if (event.source !== global.parent) return;
    var message = event.data;
    if (!message || message.jsonrpc !== "2.0") return;
    if (message.method === undefined && message.id !== undefined) {
      var waiting = this.pending[message.id];
      if (!waiting) return;
      delete this.pending[message.id];
      if (message.error) {
        var error = new Error(message.error.message || "JSON-RPC error");
        error.code = message.error.code;
        error.data = message.error.data;
        waiting.reject(error);
      } else {
        waiting.resolve(message.result);
      }
      return;
    }
    this._dispatch(message);
  };

  McpApp.prototype._dispatch = function (message) {
    var params = message.params || {};
    switch (message.method) {
      case "ui/notifications/tool-input":
        this.toolInput = params.arguments || {};
        this._call(this.onToolInput, this.toolInput);
        break;
      case "ui/notifications/tool-input-partial":
        this._call(this.onToolInputPartial, params.arguments || {});
        break;
      case "ui/notifications/tool-result":
        this.toolResult = params;
        this._call(this.onToolResult, params);
        break;
      case "ui/notifications/tool-cancelled":
        this._call(this.onToolCancelled, params.reason);
        break;
      case "ui/notifications/host-context-changed":
        for (var key in params) this.hostContext[key] = params[key];
        this._call(this.onHostContextChanged, this.hostContext);
        break;
      case "ui/resource-teardown":
        this._call(this.onTeardown, params.reason);
        if (message.id !== undefined) this._reply(message.id, {});
        break;
      case "ping":
        if (message.id !== undefined) this._reply(message.id, {});
        break;
      default:
        if (message.id !== undefined) {
          this._post({ id: message.id, error: { code: -32601, message: "Method not found" } });
        }
    }
  };

  /* ui/initialize, then ui/notifications/initialized: the host sends nothing before the latter. */
  McpApp.prototype.initialize = function () {
    var self = this;
    return this.request("ui/initialize", {
      protocolVersion: PROTOCOL_VERSION,
      appInfo: this.info,
      appCapabilities: {},
    }).then(function (result) {
      self.hostContext = (result && result.hostContext) || {};
      self.hostCapabilities = (result && result.hostCapabilities) || {};
      self.notify("ui/notifications/initialized", {});
      self._watchSize();
      return self;
    });
  };

  McpApp.prototype._watchSize = function () {
    if (typeof global.ResizeObserver !== "function" || !global.document) return;
    var self = this;
    var last = "";
    var observer = new global.ResizeObserver(function () {
      // The content's height (scrollHeight would never go below the iframe's own height).
      var root = global.document.documentElement;
      var size = { width: Math.ceil(root.scrollWidth), height: Math.ceil(root.getBoundingClientRect().height) };
      var key = size.width + "x" + size.height;
      if (key !== last) {
        last = key;
        self.notify("ui/notifications/size-changed", size);
      }
    });
    observer.observe(global.document.documentElement);
  };

  /* tools/call through the host: resolves with the CallToolResult (isError set for a tool's failure). */
  McpApp.prototype.callTool = function (name, args) {
    return this.request("tools/call", { name: name, arguments: args || {} });
  };

  McpApp.prototype.readResource = function (uri) {
    return this.request("resources/read", { uri: uri });
  };

  McpApp.prototype.sendMessage = function (text) {
    return this.request("ui/message", { role: "user", content: [{ type: "text", text: text }] });
  };

  McpApp.prototype.openLink = function (url) {
    return this.request("ui/open-link", { url: url });
  };

  McpApp.prototype.log = function (level, data) {
    this.notify("notifications/message", { level: level, data: data });
  };

  McpApp.connect = function (info) {
    return new McpApp(info).initialize();
  };

  global.McpApp = McpApp;
})(window);
