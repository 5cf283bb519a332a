// The live run page: the trace, the header's progress and the speedup chart.
//
// Events come over ws(s)://HOST/ws/runs/ID/?after=SEQ as {"type": "event", "event": {seq, at,
// kind, payload}}, saved ones first, in seq order with no gap. A dropped socket reconnects with
// the last seq seen (backing off 1, 2, 4 ... 10 s); close code 4404 means the run is not visible.
// Where no socket ever opens (a server without websockets), the REST endpoint is polled instead.
//
// Everything from the model, the user or the worker goes in through textContent, never as HTML.
(function () {
  "use strict";

  var root = document.getElementById("run");
  if (!root) return;

  var ACTIVE = { queued: true, running: true };
  var END_STATES = {
    finished: "finished", limits_exceeded: "hit its limits", format_errors: "too many malformed replies",
    backend_error: "model unavailable", context_length: "context full", crashed: "crashed",
    cancelled: "cancelled",
  };
  var ERROR_LINE = /\b(error|fatal)\b|FAILED/i;
  var SVG = "http://www.w3.org/2000/svg";
  var PAGE_SIZE = 500;

  var runId = root.dataset.runId;
  var eventsUrl = root.dataset.eventsUrl;
  var candidatesUrl = root.dataset.candidatesUrl;
  var pageWasActive = ACTIVE[root.dataset.status] === true;
  var state = {
    status: root.dataset.status,
    started: parseDate(root.dataset.started),
    finished: parseDate(root.dataset.finished),
    lastSeq: 0,
    maxTurns: null,
    points: {}, // candidate seq (or agent index) -> {key, seq, turn, eager, compile}
    stopped: false,
  };
  var traceList = document.getElementById("trace");
  var traceState = document.getElementById("trace-state");

  // ---- small DOM helpers -----------------------------------------------------------------

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function svg(tag, attrs, text) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (name) { node.setAttribute(name, attrs[name]); });
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function field(name) { return root.querySelector('[data-field="' + name + '"]'); }

  function setField(name, text) {
    var node = field(name);
    if (node) node.textContent = text;
  }

  function parseDate(value) {
    if (!value) return null;
    var date = new Date(value);
    return isNaN(date.getTime()) ? null : date;
  }

  function firstLine(text, limit) {
    var line = String(text || "").trim().split("\n")[0];
    limit = limit || 180;
    return line.length > limit ? line.slice(0, limit - 1) + "…" : line;
  }

  function isNum(value) { return typeof value === "number" && isFinite(value); }
  function times(value) { return isNum(value) ? value.toFixed(2) + "×" : "—"; }
  function dollars(value) { return isNum(value) ? "$" + value.toFixed(4) : "—"; }
  function count(value) { return isNum(value) ? value.toLocaleString("en-US") : "—"; }

  function duration(seconds) {
    seconds = Math.max(0, Math.floor(seconds));
    var h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    if (h) return h + " h " + String(m).padStart(2, "0") + " min";
    if (m) return m + " min " + String(s).padStart(2, "0") + " s";
    return s + " s";
  }

  function pre(text, className) { return el("pre", className, text); }

  function logPre(log) {
    // A compile log with the lines that report errors in red.
    var box = el("pre", "log");
    String(log).split("\n").forEach(function (line, i) {
      if (i) box.appendChild(document.createTextNode("\n"));
      box.appendChild(ERROR_LINE.test(line) ? el("span", "err", line) : document.createTextNode(line));
    });
    return box;
  }

  function json(value) { return JSON.stringify(value, null, 2); }

  function candidateLink(seq, text) {
    var link = el("a", null, text);
    link.href = candidatesUrl + encodeURIComponent(seq) + "/";
    return link;
  }

  // ---- one row per event -------------------------------------------------------------------

  function summary(event) {
    var p = event.payload || {};
    var args = p.arguments || {};
    var parts = [];
    switch (event.kind) {
      case "thought":
        parts.push(firstLine(p.text || p.reasoning || "(no text)"));
        break;
      case "tool_call":
        parts.push(el("strong", null, p.name || "?"));
        if (args.path) parts.push(" " + args.path);
        if (p.name === "write_file" && typeof args.content === "string") {
          parts.push(" (" + args.content.split("\n").length + " lines)");
        }
        if (p.name === "finish" && args.summary) parts.push(": " + firstLine(args.summary, 140));
        if (p.name === "tune" && Array.isArray(args.variants)) {
          var names = args.variants.map(function (v, i) { return (v && v.name) || "v" + (i + 1); });
          parts.push(" " + names.length + " variants: " + firstLine(names.join(", "), 140));
        }
        break;
      case "tool_result":
        parts.push(el("span", p.ok ? "ok" : "fail", p.ok ? "✓ " : "✗ "));
        parts.push(el("strong", null, p.name || "?"));
        parts.push(": " + (isGraph(p) ? graphSummary(p.verdict) : firstLine(p.text, 160)));
        break;
      case "candidate":
        parts.push("candidate " + (p.seq !== undefined ? p.seq : "#" + p.index) + ": ");
        parts.push(el("span", p.verified ? "ok" : "fail", p.verified ? "verified" : "not verified"));
        if (isNum(p.speedup_vs_eager)) parts.push(", " + times(p.speedup_vs_eager) + " vs eager");
        if (isNum(p.speedup_vs_compile)) parts.push(", " + times(p.speedup_vs_compile) + " vs torch.compile");
        if (p.best) parts.push(" · best so far");
        break;
      case "error":
        parts.push((p.kind ? p.kind + ": " : "") + firstLine(p.message));
        break;
      case "status":
        parts.push(statusSummary(p));
        break;
      default:
        parts.push(firstLine(json(p)));
    }
    return parts;
  }

  function statusSummary(p) {
    switch (p.state) {
      case "claimed": return "claimed by " + (p.worker || "a worker") + (p.attempt > 1 ? " (attempt " + p.attempt + ")" : "");
      case "started":
        var agent = p.agent || {};
        var started = "agent started: " + [agent.name, agent.model, agent.backend].filter(Boolean).join(" · ");
        return p.trained ? started + " · trained: " + p.trained : started;
      case "running":
        return "turn " + p.turn + "/" + p.max_turns + " · " + count(p.tokens) + " tokens · " +
          dollars(p.cost_usd) + " · " + duration(p.seconds || 0) + bestSummary(p.best) +
          (p.detail ? " · " + firstLine(p.detail) : "");
      case "requeued": return "requeued: " + firstLine(p.detail || "the worker was lost");
      case "cancel_requested": return "cancel requested: the agent stops at its next step";
      case "ended": return "run " + p.run_status + (p.outcome ? " (" + p.outcome + ")" : "") + (p.detail ? ": " + firstLine(p.detail) : "");
      default:
        return (END_STATES[p.state] || p.state || "status") + (p.detail ? ": " + firstLine(p.detail) : "");
    }
  }

  function bestSummary(best) {
    if (!best) return "";
    if (!isNum(best.speedup_vs_eager)) return " · best: verified, not timed yet";
    return " · best " + times(best.speedup_vs_eager) + " vs eager, " + times(best.speedup_vs_compile) + " vs compile";
  }

  function details(event) {
    var p = event.payload || {};
    var args = p.arguments || {};
    var body = el("div", "body");
    function add(title, node) {
      if (title) body.appendChild(el("h4", null, title));
      body.appendChild(node);
    }
    switch (event.kind) {
      case "thought":
        if (p.text) add("text", pre(p.text));
        if (p.reasoning) add("reasoning", pre(p.reasoning));
        break;
      case "tool_call":
        if (p.name === "write_file" && typeof args.content === "string") {
          add(args.path || "content", pre(args.content));
        } else if (p.name === "edit_file") {
          add("in " + (args.path || "?") + ", replace", pre(args.old_text || ""));
          add("with", pre(args.new_text || ""));
        } else if (p.arguments) {
          add("arguments", pre(json(p.arguments)));
        } else if (p.raw_arguments) {
          add("raw arguments (not valid JSON)", pre(p.raw_arguments));
        }
        break;
      case "tool_result":
        if (isGraph(p)) {
          add("graph", pre(graphLines(p.verdict)));
          add("as the model read it", pre(p.text || ""));
          break;
        }
        add("result", pre(p.text || ""));
        if (p.verdict && typeof p.verdict === "object") {
          var verdict = Object.assign({}, p.verdict);
          if (verdict.log) {
            add("compile log", logPre(verdict.log));
            delete verdict.log;
          }
          add("verdict", pre(json(verdict)));
        }
        break;
      case "candidate":
        if (p.seq !== undefined) {
          var open = el("p");
          open.appendChild(candidateLink(p.seq, "open candidate " + p.seq + ": sources, diff and verdict →"));
          add(null, open);
        }
        if (p.verify) add("verify", pre(json(p.verify)));
        if (p.profile) add("profile", pre(json(p.profile)));
        break;
      case "error":
        add("message", pre(p.message || "", "errtext"));
        break;
      default:
        add(null, pre(json(p)));
    }
    return body;
  }

  // ---- inspect_graph's result: the op's graph (Graph IR, docs/fusion.md) -------------------
  // Its text is the IR as JSON for the model, whose first line is "{": shown as one line per
  // node instead, like "mul = mul(relu, 1.5) → float32[256, 1024]".

  function isGraph(p) {
    return p.name === "inspect_graph" && p.verdict && Array.isArray(p.verdict.nodes);
  }

  function shaped(value) {
    return (value.dtype || "") + "[" + (value.shape || []).join(", ") + "]";
  }

  function argText(arg) {
    if (!arg || typeof arg !== "object") return String(arg);
    if ("node" in arg) return arg.node;
    if ("input" in arg) return arg.input;
    if ("param" in arg) return arg.param;
    if ("const" in arg) return JSON.stringify(arg["const"]);
    return JSON.stringify(arg);
  }

  function graphSummary(g) {
    var ops = g.nodes.map(function (n) { return n.op; });
    var inputs = (g.inputs || []).map(function (i) { return i.name + " " + shaped(i); });
    var text = g.nodes.length + " op" + (g.nodes.length === 1 ? "" : "s");
    if (ops.length) text += " (" + firstLine(ops.join(", "), 80) + ")";
    if (inputs.length) text += " on " + inputs.join(", ");
    var unsupported = g.unsupported || [];
    if (unsupported.length) text += "; " + unsupported.length + " unsupported";
    return text;
  }

  function graphLines(g) {
    var lines = (g.inputs || []).map(function (i) { return "input " + i.name + ": " + shaped(i); });
    (g.params || []).forEach(function (q) { lines.push("param " + q.name + ": " + shaped(q)); });
    g.nodes.forEach(function (n) {
      var attrs = n.attrs && Object.keys(n.attrs).length ? " " + JSON.stringify(n.attrs) : "";
      lines.push(n.name + " = " + n.op + "(" + (n.args || []).map(argText).join(", ") + ")" + attrs + " → " + shaped(n));
    });
    lines.push("outputs: " + (g.outputs || []).map(argText).join(", "));
    (g.unsupported || []).forEach(function (u) { lines.push("unsupported: " + (typeof u === "string" ? u : JSON.stringify(u))); });
    return lines.join("\n");
  }

  function appendRow(event) {
    var p = event.payload || {};
    var item = el("li", "k-" + event.kind + (p.state === "running" ? " progress" : ""));
    item.id = "event-" + event.seq;
    var box = el("details");
    var head = el("summary");
    head.appendChild(el("span", "seq", "#" + event.seq));
    head.appendChild(el("span", "turn", isNum(p.turn) ? "turn " + p.turn : ""));
    head.appendChild(el("span", "kind", event.kind));
    var text = el("span", "summary");
    summary(event).forEach(function (part) {
      text.appendChild(typeof part === "string" ? document.createTextNode(part) : part);
    });
    head.appendChild(text);
    if (event.at) head.title = new Date(event.at).toLocaleString();
    box.appendChild(head);
    // The body is built when first opened: a long run has thousands of events.
    box.addEventListener("toggle", function () {
      if (box.open && box.childNodes.length === 1) box.appendChild(details(event));
    });
    item.appendChild(box);
    traceList.appendChild(item);
  }

  // ---- what an event changes on the page ---------------------------------------------------

  function setStatus(status, outcome) {
    // `outcome`: what the badge says where it is not the status ("finished: nothing faster")
    state.status = status;
    var badge = field("status");
    if (badge) {
      badge.textContent = outcome || status;
      badge.className = "status big s-" + (outcome ? "nothing-faster" : status);
    }
  }

  function showProgress(p) {
    if (isNum(p.max_turns)) {
      state.maxTurns = p.max_turns;
      setField("turn", p.turn + "/" + p.max_turns);
    }
    if (isNum(p.tokens)) setField("tokens", count(p.tokens));
    if (isNum(p.cost_usd)) setField("cost", dollars(p.cost_usd));
    if (p.best) showBest(p.best.speedup_vs_eager, p.best.speedup_vs_compile);
  }

  function showBest(eager, compile) {
    // Once re-graded, the header shows the re-grade's figure (the one that counts): the run's
    // own, replayed from its trace, must not replace it.
    var regraded = field("best-eager") && field("best-eager").dataset.regraded;
    if (regraded) return;
    if (isNum(eager)) setField("best-eager", times(eager));
    if (isNum(compile)) setField("best-compile", times(compile));
  }

  function apply(event) {
    var p = event.payload || {};
    if (event.kind === "status") {
      if (p.state === "claimed") {
        setStatus("running");
        setField("queue", "taken by a worker");
        var limit = field("time-limit");
        if (limit) limit.textContent = limit.textContent.replace(" once it starts", "");
        if (!state.started) {
          state.started = parseDate(event.at);
          if (state.started) setField("started", state.started.toISOString().slice(0, 19).replace("T", " ") + " UTC");
        }
      } else if (p.state === "requeued") {
        setStatus("queued");
        setField("detail", "requeued: " + (p.detail || "the worker was lost"));
        setField("queue", "requeued: waiting for a worker");
        followQueue();
      } else if (p.state === "cancel_requested") {
        setField("detail", "cancel requested: the agent stops at its next step");
      } else if (p.state === "ended") {
        setStatus(p.run_status || "ended", p.outcome);
        state.finished = parseDate(event.at) || new Date();
        if (p.detail) setField("detail", p.detail);
        runEnded();
        return;
      } else if (END_STATES[p.state] && p.detail) {
        setField("detail", (END_STATES[p.state]) + ": " + p.detail);
      }
      showProgress(p);
    } else if (event.kind === "candidate") {
      addPoint(p);
      upsertCandidateRow(p);
      if (p.best && p.verified) showBest(p.speedup_vs_eager, p.speedup_vs_compile);
    }
  }

  // A reply while the model writes it: partial thought events carry the text that came since
  // the last one; they grow one live row per turn, which the whole thought then replaces.
  var liveRows = {}; // turn -> {item, text, reasoning}

  function appendPartial(p) {
    var live = liveRows[p.turn];
    if (!live) {
      var item = el("li", "k-thought live");
      var head = el("div", "live-head");
      head.appendChild(el("span", "turn", "turn " + p.turn));
      head.appendChild(el("span", "kind", "thought"));
      head.appendChild(el("span", "summary", "the model is writing…"));
      live = { item: item, reasoning: pre("", "reasoning"), text: pre("") };
      item.appendChild(head);
      item.appendChild(live.reasoning);
      item.appendChild(live.text);
      traceList.appendChild(item);
      liveRows[p.turn] = live;
    }
    live.reasoning.textContent += p.reasoning || "";
    live.text.textContent += p.text || "";
  }

  function endPartial(turn) {
    var live = liveRows[turn];
    if (live) live.item.remove();
    delete liveRows[turn];
  }

  function handle(event) {
    if (!event || typeof event.seq !== "number" || event.seq <= state.lastSeq) return;
    state.lastSeq = event.seq;
    var p = event.payload || {};
    if (event.kind === "thought" && p.partial) return appendPartial(p);
    if (event.kind === "thought" || event.kind === "tool_call") endPartial(p.turn);
    appendRow(event);
    apply(event);
  }

  function runEnded() {
    stop("run " + state.status);
    if (!pageWasActive) return;
    // Once, so that the header and links come from the database; never in a loop.
    var key = "kernelarena-run-reloaded-" + runId;
    try {
      if (sessionStorage.getItem(key)) return;
      sessionStorage.setItem(key, "1");
    } catch (e) { return; }
    window.location.reload();
  }

  // ---- the candidates table ----------------------------------------------------------------

  function upsertCandidateRow(p) {
    if (p.seq === undefined || p.seq === null) return;
    var table = document.getElementById("candidates");
    if (!table) return;
    var body = table.tBodies[0];
    var none = body.querySelector("tr.none");
    if (none) none.remove();
    var row = body.querySelector('tr[data-seq="' + p.seq + '"]');
    if (!row) {
      row = el("tr");
      row.dataset.seq = p.seq;
      var after = Array.prototype.find.call(body.rows, function (r) { return Number(r.dataset.seq) > p.seq; });
      body.insertBefore(row, after || null);
    }
    while (row.firstChild) row.removeChild(row.firstChild);
    var profile = p.profile || {};
    var verified = el("span");
    verified.appendChild(p.verified ? el("span", "yes", "verified") : el("span", "no", "no"));
    var issue = issueOf(p);
    if (issue) {
      verified.appendChild(document.createTextNode(" "));
      var why = el("span", "mono small", issue);
      why.dataset.field = "issue";
      verified.appendChild(why);
    }
    var cells = [
      candidateLink(p.seq, String(p.seq)),
      verified,
      times(p.speedup_vs_eager),
      times(p.speedup_vs_compile),
      isNum(profile.sol_fraction) ? Math.round(profile.sol_fraction * 100) + "%" : "—",
    ];
    cells.forEach(function (content, i) {
      var cell = el("td", i >= 2 ? "num" : null);
      if (typeof content === "string") cell.textContent = content;
      else cell.appendChild(content);
      row.appendChild(cell);
    });
  }

  // Why a candidate did not verify, or was not timed (webapp/runs/views.py's _candidate_row).
  function issueOf(p) {
    var parts = [p.verify || {}, p.profile || {}];
    for (var i = 0; i < parts.length; i++) {
      var violations = parts[i].violations || [];
      if (violations.length) return violations[0].code + ": " + violations[0].detail;
    }
    for (var j = 0; j < parts.length; j++) {
      if (parts[j].error) {
        var lines = String(parts[j].error).trim().split("\n");
        return lines[lines.length - 1];
      }
    }
    return "";
  }

  // ---- the chart ---------------------------------------------------------------------------

  function addPoint(p) {
    var key = p.seq !== undefined ? "s" + p.seq : "i" + p.index;
    state.points[key] = {
      seq: p.seq, index: p.index, turn: p.turn,
      eager: isNum(p.speedup_vs_eager) ? p.speedup_vs_eager : null,
      compile: isNum(p.speedup_vs_compile) ? p.speedup_vs_compile : null,
    };
    scheduleChart();
  }

  var chartPending = false;
  function scheduleChart() {
    // Replaying a long trace would otherwise redraw the chart once per candidate.
    if (chartPending) return;
    chartPending = true;
    setTimeout(function () { chartPending = false; drawChart(); }, 50);
  }

  function niceStep(range) {
    var steps = [0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10, 20, 25, 50, 100, 200, 500, 1000];
    for (var i = 0; i < steps.length; i++) if (range / steps[i] <= 6) return steps[i];
    return Math.pow(10, Math.ceil(Math.log10(range / 6)));
  }

  function drawChart() {
    var box = document.getElementById("chart");
    var points = Object.keys(state.points).map(function (k) { return state.points[k]; })
      .filter(function (pt) { return isNum(pt.turn) && (pt.eager !== null || pt.compile !== null); })
      .sort(function (a, b) { return a.turn - b.turn || (a.seq || a.index) - (b.seq || b.index); });
    if (!box || !points.length) return;

    var W = 720, H = 280, M = { l: 52, r: 18, t: 34, b: 40 };
    var maxTurn = Math.max(1, state.maxTurns || 0, Math.max.apply(null, points.map(function (pt) { return pt.turn; })));
    var values = [];
    points.forEach(function (pt) { if (pt.eager !== null) values.push(pt.eager); if (pt.compile !== null) values.push(pt.compile); });
    var yStep = niceStep(Math.max(1.2, Math.max.apply(null, values) * 1.1));
    var yMax = Math.ceil(Math.max(1.2, Math.max.apply(null, values) * 1.1) / yStep) * yStep;
    function x(turn) { return M.l + (turn / maxTurn) * (W - M.l - M.r); }
    function y(value) { return H - M.b - (value / yMax) * (H - M.t - M.b); }

    var chart = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img" });
    chart.appendChild(svg("title", {}, "speedup of each profiled candidate over the turn number"));

    for (var v = 0; v <= yMax + 1e-9; v += yStep) {
      chart.appendChild(svg("line", { class: "grid", x1: M.l, x2: W - M.r, y1: y(v), y2: y(v) }));
      chart.appendChild(svg("text", { class: "tick", x: M.l - 6, y: y(v) + 4, "text-anchor": "end" }, +v.toFixed(2) + "×"));
    }
    var xStep = Math.max(1, Math.ceil(maxTurn / 10));
    for (var t = 0; t <= maxTurn; t += xStep) {
      chart.appendChild(svg("text", { class: "tick", x: x(t), y: H - M.b + 16, "text-anchor": "middle" }, t));
    }
    chart.appendChild(svg("line", { class: "axis", x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b }));
    chart.appendChild(svg("line", { class: "axis", x1: M.l, x2: M.l, y1: M.t, y2: H - M.b }));
    chart.appendChild(svg("text", { class: "tick", x: (M.l + W - M.r) / 2, y: H - 6, "text-anchor": "middle" }, "turn"));
    chart.appendChild(svg("line", { class: "parity", x1: M.l, x2: W - M.r, y1: y(1), y2: y(1) }));
    chart.appendChild(svg("text", { class: "tick", x: W - M.r, y: y(1) - 4, "text-anchor": "end" }, "1.0 = as fast as the baseline"));

    [["eager", "vs eager"], ["compile", "vs torch.compile"]].forEach(function (series, i) {
      var name = series[0];
      var mine = points.filter(function (pt) { return pt[name] !== null; });
      if (mine.length > 1) {
        var path = mine.map(function (pt) { return x(pt.turn).toFixed(1) + "," + y(pt[name]).toFixed(1); }).join(" ");
        chart.appendChild(svg("polyline", { class: "series-" + name, points: path }));
      }
      mine.forEach(function (pt) {
        var dot = svg("circle", { class: "dot-" + name, cx: x(pt.turn), cy: y(pt[name]), r: 4 });
        var label = "candidate " + (pt.seq !== undefined ? pt.seq : "#" + pt.index) + ", turn " + pt.turn +
          ": " + times(pt[name]) + " " + series[1];
        dot.appendChild(svg("title", {}, label));
        if (pt.seq !== undefined && pt.seq !== null) {
          var link = svg("a", { href: candidatesUrl + encodeURIComponent(pt.seq) + "/" });
          link.appendChild(dot);
          chart.appendChild(link);
        } else {
          chart.appendChild(dot);
        }
      });
      var lx = M.l + 8 + i * 150;
      chart.appendChild(svg("circle", { class: "dot-" + name, cx: lx, cy: 14, r: 4 }));
      chart.appendChild(svg("text", { class: "legend", x: lx + 9, y: 18 }, series[1]));
    });

    while (box.firstChild) box.removeChild(box.firstChild);
    box.appendChild(chart);
  }

  // ---- elapsed time ------------------------------------------------------------------------

  // While it runs, counted on from the seconds the server gave (or from its claim, seen live)
  // by this page's own clock: a browser's wall clock set behind the server's held it at 0 s.
  var elapsedNode = field("elapsed");
  var counting = elapsedNode && elapsedNode.dataset.seconds !== "" && ACTIVE[state.status]
    ? { seconds: Number(elapsedNode.dataset.seconds), at: performance.now() } : null;

  function tick() {
    var node = field("elapsed");
    if (!node || !state.started) return;
    if (state.finished) {
      node.textContent = duration((state.finished - state.started) / 1000);
    } else if (ACTIVE[state.status]) {
      if (!counting) counting = { seconds: 0, at: performance.now() }; // claimed while watched
      node.textContent = duration(counting.seconds + (performance.now() - counting.at) / 1000);
    }
  }

  // ---- transport: websocket, or polling the REST API where no socket opens -----------------

  var retryDelay = 1, everOpened = false, failedOpens = 0, socket = null, polling = false;

  function setConnection(text) { if (traceState) traceState.textContent = text; }

  function stop(text) {
    state.stopped = true;
    setConnection(text);
    if (socket) {
      try { socket.close(1000); } catch (e) { /* already closed */ }
      socket = null;
    }
  }

  function connect() {
    if (state.stopped) return;
    if (!("WebSocket" in window)) { startPolling(); return; }
    var scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    var url = scheme + "//" + window.location.host + "/ws/runs/" + encodeURIComponent(runId) + "/?after=" + state.lastSeq;
    var ws, opened = false;
    try { ws = new WebSocket(url); } catch (e) { startPolling(); return; }
    socket = ws;
    ws.onopen = function () {
      opened = everOpened = true;
      retryDelay = 1;
      // An ended run's trace is replayed first: its state says so until the `ended` event.
      setConnection(ACTIVE[state.status] ? "live" : "loading the trace…");
    };
    ws.onmessage = function (message) {
      var data;
      try { data = JSON.parse(message.data); } catch (e) { return; }
      if (data && data.type === "event") handle(data.event);
    };
    ws.onclose = function (closing) {
      if (socket === ws) socket = null;
      if (state.stopped) return;
      if (closing.code === 4404) { stop("This run does not exist, or you cannot see it."); return; }
      // 1000: the server sent the run's last event (consumers.py); nothing more will come.
      if (closing.code === 1000) { stop("run " + state.status); return; }
      if (!opened && !everOpened && ++failedOpens >= 3) { startPolling(); return; }
      setConnection("connection lost: reconnecting in " + retryDelay + " s…");
      setTimeout(connect, retryDelay * 1000);
      retryDelay = Math.min(retryDelay * 2, 10);
    };
  }

  function startPolling() {
    if (polling || state.stopped) return;
    polling = true;
    setConnection("no live connection: polling");
    poll();
  }

  function poll() {
    if (state.stopped) return;
    fetch(eventsUrl + "?after=" + state.lastSeq + "&limit=" + PAGE_SIZE, {
      credentials: "same-origin", headers: { Accept: "application/json" },
    }).then(function (response) {
      if (response.status === 401) { stop("No live connection, and reading the trace over the API needs you to log in."); return null; }
      if (response.status === 404) { stop("This run does not exist, or you cannot see it."); return null; }
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.json();
    }).then(function (events) {
      if (!events) return;
      events.forEach(handle);
      if (state.stopped) return;
      if (events.length === PAGE_SIZE) { poll(); return; }
      if (ACTIVE[state.status]) { setTimeout(poll, 2000); return; }
      stop("run " + state.status);
    }).catch(function () {
      setConnection("connection lost: retrying…");
      setTimeout(poll, 5000);
    });
  }

  // ---- the queue position, while queued ------------------------------------------------------
  // Runs ahead start or are cancelled while this one waits, and no event of this run says so:
  // its place is asked of the API every 3 s until a worker claims it (the claim event says so).

  var runUrl = root.dataset.runUrl;
  var followingQueue = false;

  function followQueue() {
    if (followingQueue || !runUrl || !field("queue")) return;
    followingQueue = true;
    function ask() {
      if (state.status !== "queued" || state.stopped) { followingQueue = false; return; }
      fetch(runUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (response.status === 401 || response.status === 404) return null; // not for this viewer
          if (!response.ok) throw new Error("HTTP " + response.status);
          return response.json();
        })
        .then(function (run) {
          if (!run) { followingQueue = false; return; }
          if (state.status === "queued" && run.queue_position) {
            setField("queue", "position " + run.queue_position + " in the " + root.dataset.gpuType + " run queue");
          }
          setTimeout(ask, 3000);
        })
        .catch(function () { setTimeout(ask, 10000); }); // the server restarting
    }
    setTimeout(ask, 3000);
  }

  // ---- start -------------------------------------------------------------------------------

  function toggleAll(open) {
    traceList.querySelectorAll("details").forEach(function (box) { box.open = open; });
  }
  var expand = document.getElementById("expand-all");
  var collapse = document.getElementById("collapse-all");
  if (expand) expand.addEventListener("click", function () { toggleAll(true); });
  if (collapse) collapse.addEventListener("click", function () { toggleAll(false); });

  tick();
  setInterval(tick, 1000);
  setConnection("connecting…");
  connect();
  followQueue();
})();
