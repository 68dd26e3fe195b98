/* The admin's live page of pending MCP requests.
 *
 * A WebSocket (see mcp_server/admin_live/consumer.py) pushes a snapshot every second: the pending requests
 * and the last hour by minute. Rows are updated in place (selections survive updates); the chart is drawn
 * as inline SVG by the code below, with no library and nothing fetched from elsewhere.
 */
(function () {
  "use strict";

  const root = document.getElementById("mcp-live");
  if (!root) {
    return;
  }
  const byId = (id) => document.getElementById(id);
  const canAbort = root.dataset.canAbort === "1";
  const tbody = byId("mcp-live-rows");
  const form = byId("mcp-live-form");
  const abortButton = byId("mcp-live-abort");
  const selectAll = byId("mcp-live-all");
  const rows = new Map();
  const selected = new Set();
  let socket = null;
  let retry = 500;

  // -- formatting ------------------------------------------------------------------------------------

  function duration(seconds) {
    const s = Math.max(0, seconds);
    if (s < 60) {
      return s.toFixed(1) + " s";
    }
    if (s < 3600) {
      return Math.floor(s / 60) + " min " + Math.floor(s % 60) + " s";
    }
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }

  function millis(value) {
    if (value === null || value === undefined) {
      return "–";
    }
    if (value < 1000) {
      return Math.round(value) + " ms";
    }
    return value < 10000 ? (value / 1000).toFixed(1) + " s" : Math.round(value / 1000) + " s";
  }

  function clock(iso) {
    return new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  function setState(state, text) {
    const badge = byId("mcp-live-state");
    badge.dataset.state = state;
    badge.textContent = text;
  }

  // -- the socket ------------------------------------------------------------------------------------

  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    setState("connecting", "connecting…");
    socket = new WebSocket(scheme + "//" + location.host + root.dataset.websocketPath);
    socket.onopen = () => {
      retry = 500;
      setState("live", "live");
    };
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.type === "snapshot") {
        render(message);
      }
    };
    socket.onclose = (event) => {
      socket = null;
      if (event.code === 4403) {
        setState("offline", "permission withdrawn");
        return;
      }
      setState("offline", "disconnected; retrying…");
      window.setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }

  function refresh() {
    if (socket && socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify({ type: "refresh" }));
    }
  }

  // -- the table -------------------------------------------------------------------------------------

  function link(href, text, title) {
    const a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    if (title) {
      a.title = title;
    }
    return a;
  }

  // The request's trace: its id (the first 8 digits, the whole in the tooltip), linked when the server made
  // a link of it (TRACE_URL); nothing without a span. Text and attributes only, never HTML; an href that
  // is not http(s) is not used.
  function traceCell(cell, row) {
    if (!row.trace_id) {
      cell.textContent = "–";
      return;
    }
    const shown = row.trace_id.length > 8 ? row.trace_id.slice(0, 8) + "…" : row.trace_id;
    if (row.trace_url && /^https?:\/\//i.test(row.trace_url)) {
      const a = link(row.trace_url, shown, "trace " + row.trace_id);
      a.className = "mcp-live-trace";
      a.target = "_blank";
      a.rel = "noopener noreferrer";
      cell.appendChild(a);
    } else {
      const span = document.createElement("span");
      span.className = "mcp-live-trace";
      span.title = "trace " + row.trace_id;
      span.textContent = shown;
      cell.appendChild(span);
    }
  }

  function syncSelection() {
    if (abortButton) {
      abortButton.disabled = selected.size === 0;
    }
    if (selectAll) {
      selectAll.checked = rows.size > 0 && selected.size === rows.size;
    }
  }

  function makeRow(row) {
    const tr = document.createElement("tr");
    tr.dataset.pk = String(row.pk);
    const cells = {};
    if (canAbort) {
      const td = document.createElement("td");
      td.className = "action-checkbox";
      const box = document.createElement("input");
      box.type = "checkbox";
      box.className = "action-select";
      box.value = String(row.pk);
      box.setAttribute("aria-label", "Select request " + row.id);
      box.addEventListener("change", () => {
        if (box.checked) {
          selected.add(box.value);
        } else {
          selected.delete(box.value);
        }
        tr.classList.toggle("selected", box.checked);
        syncSelection();
      });
      td.appendChild(box);
      tr.appendChild(td);
      cells.box = box;
    }
    for (const key of ["id", "age", "method", "name", "session", "client", "user", "worker", "deadline", "trace"]) {
      const cell = document.createElement(key === "id" ? "th" : "td");
      cell.className = "field-" + key;
      tr.appendChild(cell);
      cells[key] = cell;
    }
    cells.id.appendChild(link(root.dataset.entryUrl.replace("__pk__", encodeURIComponent(row.pk)), row.id));
    if (row.session) {
      const href = root.dataset.sessionUrl.replace("__id__", encodeURIComponent(row.session));
      cells.session.appendChild(link(href, row.session.slice(0, 10) + "…", row.session));
    } else {
      cells.session.textContent = "–";
    }
    cells.method.textContent = row.method;
    cells.name.textContent = row.name || "–";
    if (row.ui) {  // MCP Apps: a tool with a view, or one only views call (the call came from a view)
      const badge = document.createElement("span");
      badge.className = "mcp-live-ui mcp-live-ui-" + row.ui;
      badge.textContent = row.ui === "app" ? "by a view" : "has a view";
      cells.name.append(" ", badge);
    }
    cells.client.textContent = row.client || "–";
    cells.user.textContent = row.user || "–";
    if (row.oauth_client_id) {
      const via = document.createElement("span");
      via.className = "mcp-live-oauth";
      via.title = "OAuth client " + row.oauth_client_id;
      via.textContent = "via " + row.oauth_client;
      cells.user.append(document.createElement("br"), via);
    }
    cells.worker.textContent = row.worker;
    traceCell(cells.trace, row);
    return { tr, cells };
  }

  function updateRow(entry, row) {
    entry.cells.age.textContent = duration(row.age);
    const overdue = row.remaining !== null && row.remaining < 0;
    if (row.remaining === null) {
      entry.cells.deadline.textContent = "–";
    } else {
      entry.cells.deadline.textContent = overdue ? "overdue" : "in " + duration(row.remaining);
    }
    entry.tr.classList.toggle("mcp-live-overdue", overdue);
  }

  function renderRows(snapshot) {
    const present = new Set();
    let cursor = tbody.firstChild;
    for (const row of snapshot.pending) {
      const pk = String(row.pk);
      present.add(pk);
      let entry = rows.get(pk);
      if (!entry) {
        entry = makeRow(row);
        rows.set(pk, entry);
      }
      updateRow(entry, row);
      if (entry.cells.box) {
        entry.cells.box.checked = selected.has(pk);
        entry.tr.classList.toggle("selected", selected.has(pk));
      }
      if (entry.tr === cursor) {
        cursor = cursor.nextSibling;
      } else {
        tbody.insertBefore(entry.tr, cursor);
      }
    }
    for (const [pk, entry] of rows) {
      if (!present.has(pk)) {
        entry.tr.remove();
        rows.delete(pk);
        selected.delete(pk);
      }
    }
    byId("mcp-live-empty").hidden = snapshot.pending.length > 0;
    const more = byId("mcp-live-more");
    more.hidden = snapshot.pending_total <= snapshot.pending.length;
    more.textContent =
      "Showing the " + snapshot.pending.length + " oldest of " + snapshot.pending_total + " pending requests.";
    syncSelection();
  }

  // -- the chart -------------------------------------------------------------------------------------

  const SVG = "http://www.w3.org/2000/svg";
  const LEFT = 64;
  const RIGHT = 886;
  const PANEL = 78;

  function svg(name, attrs, text) {
    const node = document.createElementNS(SVG, name);
    for (const key of Object.keys(attrs)) {
      node.setAttribute(key, String(attrs[key]));
    }
    if (text !== undefined) {
      node.textContent = text;
    }
    return node;
  }

  function niceMax(value) {
    if (value <= 0) {
      return 1;
    }
    const step = Math.pow(10, Math.floor(Math.log10(value)));
    for (const factor of [1, 2, 5, 10]) {
      if (value <= factor * step) {
        return factor * step;
      }
    }
    return 10 * step;
  }

  function panel(chart, top, title, maxLabel, minLabel = "0") {
    chart.appendChild(svg("rect", { x: LEFT, y: top, width: RIGHT - LEFT, height: PANEL, class: "frame" }));
    chart.appendChild(svg("text", { x: LEFT + 6, y: top + 14, class: "title" }, title));
    chart.appendChild(svg("text", { x: LEFT - 6, y: top + 10, class: "axis", "text-anchor": "end" }, maxLabel));
    chart.appendChild(svg("text", { x: LEFT - 6, y: top + PANEL, class: "axis", "text-anchor": "end" }, minLabel));
  }

  function polyline(chart, points, cls) {
    let run = [];
    const flush = () => {
      if (run.length > 1) {
        chart.appendChild(svg("polyline", { points: run.join(" "), class: cls }));
      } else if (run.length === 1) {
        const [x, y] = run[0].split(",");
        chart.appendChild(svg("circle", { cx: x, cy: y, r: 2.5, class: cls + " dot" }));
      }
      run = [];
    };
    for (const point of points) {
      if (point === null) {
        flush();
      } else {
        run.push(point[0].toFixed(1) + "," + point[1].toFixed(1));
      }
    }
    flush();
  }

  function drawChart(history) {
    const chart = byId("mcp-live-chart");
    chart.replaceChildren();
    if (!history.length) {
      return;
    }
    const n = history.length;
    const slot = (RIGHT - LEFT) / n;
    const x = (i) => LEFT + slot * (i + 0.5);
    const tops = [8, 112, 216];

    const pendingMax = niceMax(Math.max(...history.map((m) => m.pending)));
    panel(chart, tops[0], "Pending", String(pendingMax));
    const y0 = (v) => tops[0] + PANEL - (v / pendingMax) * (PANEL - 18);
    const area = history.map((m, i) => x(i).toFixed(1) + "," + y0(m.pending).toFixed(1));
    area.push(x(n - 1).toFixed(1) + "," + (tops[0] + PANEL), x(0).toFixed(1) + "," + (tops[0] + PANEL));
    chart.appendChild(svg("polygon", { points: area.join(" "), class: "pending-area" }));
    polyline(chart, history.map((m, i) => [x(i), y0(m.pending)]), "pending-line");

    const throughputMax = niceMax(Math.max(...history.map((m) => m.throughput)));
    panel(chart, tops[1], "Settled per minute", String(throughputMax));
    history.forEach((m, i) => {
      const height = (m.throughput / throughputMax) * (PANEL - 18);
      const bar = svg("rect", {
        x: (LEFT + slot * i + 1).toFixed(1),
        y: (tops[1] + PANEL - height).toFixed(1),
        width: Math.max(1, slot - 2).toFixed(1),
        height: height.toFixed(1),
        class: "throughput-bar",
      });
      const limited = m.rate_limited ? " (" + m.rate_limited + " rate limited)" : "";
      bar.appendChild(svg("title", {}, clock(m.t) + ": " + m.throughput + " settled" + limited));
      chart.appendChild(bar);
    });

    // Latency on a log scale: a few long-running calls must not flatten everyone else's.
    const latencies = history.flatMap((m) => [m.p50, m.p95, m.p99]).filter((v) => v !== null && v > 0);
    const high = Math.log10(niceMax(latencies.length ? Math.max(...latencies) : 1000));
    const low = Math.min(high - 1, Math.floor(Math.log10(latencies.length ? Math.min(...latencies) : 1)));
    panel(chart, tops[2], "Latency, time to settle (log scale)", millis(10 ** high), millis(10 ** low));
    const y2 = (v) => {
      const at = (Math.log10(Math.max(v, 10 ** low)) - low) / (high - low);
      return tops[2] + PANEL - at * (PANEL - 18);
    };
    for (const key of ["p99", "p95", "p50"]) {
      polyline(
        chart,
        history.map((m, i) => (m[key] === null ? null : [x(i), y2(m[key])])),
        "latency-" + key,
      );
    }
    [["p50", 0], ["p95", 1], ["p99", 2]].forEach(([key, k]) => {
      const lx = RIGHT - 150 + k * 50;
      chart.appendChild(svg("line", { x1: lx, y1: tops[2] + 10, x2: lx + 14, y2: tops[2] + 10, class: "latency-" + key }));
      chart.appendChild(svg("text", { x: lx + 18, y: tops[2] + 14, class: "axis" }, key));
    });

    const labels = [[0, clock(history[0].t)], [Math.floor(n / 2), clock(history[Math.floor(n / 2)].t)], [n - 1, "now"]];
    for (const [i, text] of labels) {
      chart.appendChild(svg("text", { x: x(i), y: 316, class: "axis", "text-anchor": "middle" }, text));
    }
  }

  // -- putting it together ---------------------------------------------------------------------------

  function render(snapshot) {
    const recent = snapshot.recent;
    const hour = snapshot.history.reduce((sum, m) => sum + m.throughput, 0);
    byId("mcp-live-pending").textContent = String(snapshot.pending_total);
    byId("mcp-live-throughput").textContent = recent ? String(recent.settled) : "–";
    byId("mcp-live-limited").textContent = recent ? String(recent.rate_limited) : "–";
    byId("mcp-live-hour").textContent = snapshot.history_available ? String(hour) : "–";
    byId("mcp-live-latency").textContent = recent
      ? [recent.p50, recent.p95, recent.p99].map(millis).join(" / ")
      : "–";
    byId("mcp-live-updated").textContent = "updated " + new Date(snapshot.now).toLocaleTimeString();
    byId("mcp-live-no-history").hidden = snapshot.history_available;
    byId("mcp-live-chart").style.display = snapshot.history_available ? "" : "none";
    renderRows(snapshot);
    drawChart(snapshot.history);
  }

  if (selectAll) {
    selectAll.addEventListener("change", () => {
      for (const [pk, entry] of rows) {
        entry.cells.box.checked = selectAll.checked;
        entry.tr.classList.toggle("selected", selectAll.checked);
        if (selectAll.checked) {
          selected.add(pk);
        } else {
          selected.delete(pk);
        }
      }
      syncSelection();
    });
  }

  if (form && canAbort) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const pks = Array.from(selected);
      if (!pks.length) {
        return;
      }
      const what = pks.length === 1 ? "this request" : "these " + pks.length + " requests";
      if (!window.confirm("Abort " + what + "? Each client is answered with error -32003.")) {
        return;
      }
      const body = new FormData(form);
      pks.forEach((pk) => body.append("pk", pk));
      const status = byId("mcp-live-message");
      abortButton.disabled = true;
      try {
        const response = await fetch(root.dataset.abortUrl, {
          method: "POST",
          body,
          credentials: "same-origin",
        });
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        const result = await response.json();
        status.textContent =
          "Aborted " + result.aborted.length +
          (result.skipped.length ? "; " + result.skipped.length + " had already been settled." : ".");
        pks.forEach((pk) => selected.delete(pk));
      } catch (error) {
        status.textContent = "Abort failed: " + error.message;
      }
      syncSelection();
      refresh();
    });
  }

  connect();
})();
