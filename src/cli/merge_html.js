/* merge_html.js - draws `cumemtrace merge --format html`: the merged view
 * (cumemtrace-merge JSON, embedded in #merge-data), the answer first: the
 * ranks that hit OOM or crashed, the missing ranks, the divergent ranks with
 * their hosts and the stacks where they differ (linked to those stacks), the
 * other ranks as a distribution; then a histogram of memory per rank and a
 * host x local-rank heat map, the stacks with their outliers, the growing
 * sites, and every rank's row in a collapsed table. Compiled into the
 * command by scripts/embed.cmake. Script errors are counted on
 * <body data-script-errors> for the tests. */
(function () {
  "use strict";
  var errors = 0;
  document.body.setAttribute("data-script-errors", "0");
  window.onerror = function (message) {
    errors++;
    document.body.setAttribute("data-script-errors", String(errors));
    var pre = document.getElementById("errors") || document.body.appendChild(document.createElement("pre"));
    pre.id = "errors";
    pre.textContent += String(message) + "\n";
  };

  function bytes(n) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0) : String(Math.round(n))) + " " + units[i];
  }
  function element(tag, attributes, text) {
    var e = document.createElement(tag);
    for (var k in attributes || {}) e.setAttribute(k, attributes[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function bar(value, largest, color) {
    var outer = element("div", {"class": "bar"});
    var inner = element("span");
    inner.style.width = (largest ? Math.max(1, 100 * value / largest) : 0) + "%";
    inner.style.background = color;
    outer.appendChild(inner);
    return outer;
  }
  function frameText(f) {
    if (f.function && f.file) return f.function + " at " + f.file + ":" + f.line;
    if (f.function) return f.function + (f.module ? " [" + f.module.split("/").pop() + "]" : "");
    return f.module ? f.module.split("/").pop() + (f.offset ? "+" + f.offset : "") : "?";
  }
  function rankList(ranks) {
    var runs = [], i = 0;
    while (i < ranks.length && runs.length < 8) {
      var j = i;
      while (j + 1 < ranks.length && ranks[j + 1] === ranks[j] + 1) j++;
      runs.push(j > i ? ranks[i] + "-" + ranks[j] : String(ranks[i]));
      i = j + 1;
    }
    return runs.join(", ") + (i < ranks.length ? " and " + (ranks.length - i) + " more" : "");
  }
  function distribution(count, median, mad) {
    return count + " rank" + (count === 1 ? "" : "s") + " " + bytes(median) + (mad >= 0.5 ? " \u00b1 " + bytes(mad) : "");
  }

  var data = JSON.parse(document.getElementById("merge-data").textContent);
  var byRank = {};
  data.ranks.forEach(function (r) { byRank[r.rank] = r; });
  var hosts = {};
  data.ranks.forEach(function (r) { hosts[r.host || "?"] = true; });
  var app = document.getElementById("app");
  app.textContent = "";
  var header = element("header");
  header.appendChild(element("h1", {}, "cumemtrace merge: " + data.ranks.length + " ranks on " +
                                       Object.keys(hosts).length + " hosts"));
  header.appendChild(element("div", {"class": "meta"},
      "ranks from " + (data.ranks_from === "reports" ? "the reports' RANK" : "the order of the files") +
      (data.world_size ? "; world size " + data.world_size : "")));
  app.appendChild(header);
  var main = app.appendChild(element("main"));

  // The answer.
  var section = main.appendChild(element("section", {"id": "answer"}));
  section.appendChild(element("h2", {}, "The answer"));
  function said(id, kind, list) {
    if (!list.length) return;
    var p = section.appendChild(element("p", {"id": id, "class": "verdict-bad"}, kind + ": "));
    list.forEach(function (f, i) {
      var r = byRank[f.rank];
      p.appendChild(document.createTextNode((i ? "; " : "") + "rank " + f.rank + (r ? " on " + r.host : "") + " (" + f.file + ")"));
    });
  }
  said("oom", "Out of memory", data.oom_reports);
  said("crashed", "Crashed", data.crash_dumps);
  if (data.no_exit_report.length) {
    section.appendChild(element("p", {"id": "missing", "class": "verdict-bad"},
        "Missing: rank" + (data.no_exit_report.length === 1 ? " " : "s ") + rankList(data.no_exit_report) +
        " of the world of " + data.world_size + " left no exit report" +
        (data.missing_ranks.length ? "; rank" + (data.missing_ranks.length === 1 ? " " : "s ") +
                                     rankList(data.missing_ranks) + " left no report at all" : "")));
  }
  var first = data.divergent_ranks[0];
  section.appendChild(element("p", {"id": "divergent", "class": first ? "verdict-bad" : "verdict-none",
                                    "data-value": first ? String(first.rank) : "none"},
      first ? "Divergent: rank " + first.rank + " on " + first.host +
              (first.local_rank !== null ? " (local rank " + first.local_rank + ")" : "") + " holds " +
              bytes(first.live_bytes) + ", the median of the other ranks " + bytes(first.median_of_others)
            : "No rank diverges"));
  var list = section.appendChild(element("ul", {"id": "divergent-stacks"}));
  data.divergent_ranks.slice(0, 8).forEach(function (d, n) {
    var item = list.appendChild(element("li", {"data-rank": String(d.rank)},
        n ? "rank " + d.rank + " on " + d.host + " holds " + bytes(d.live_bytes) + ": " : ""));
    d.stacks.forEach(function (s, i) {
      item.appendChild(document.createTextNode((i ? "; " : "") + bytes(s.bytes) + " here, " + bytes(s.usual_bytes) + " on the others: "));
      var link = item.appendChild(element(s.stack === null ? "span" : "a",
          s.stack === null ? {"class": "site"} : {"class": "site", "href": "#stack-" + (s.stack + 1)}, s.site));
      if (s.label) link.textContent += " [" + s.label + "]";
      if (s.held_by) item.appendChild(element("span", {"class": "held-by"}, " \u2014 held by " + s.held_by));
    });
  });
  if (data.divergent_ranks.length > 8)
    list.appendChild(element("li", {}, "and " + (data.divergent_ranks.length - 8) + " more divergent ranks"));
  var d = data.distribution;
  section.appendChild(element("p", {"id": "distribution"},
      (first ? "The others: " : "The ranks: ") + distribution(d.ranks, d.median_bytes, d.mad_bytes) +
      " (median \u00b1 median absolute deviation; least " + bytes(d.min_bytes) + ", most " + bytes(d.max_bytes) + ")"));
  section.appendChild(element("p", {"class": "note"}, "rule: " + data.rule));

  // Memory per rank: a histogram and a host x local-rank heat map.
  section = main.appendChild(element("section", {"id": "shape"}));
  section.appendChild(element("h2", {}, "Memory per rank"));
  var row = section.appendChild(element("div", {"style": "display: flex; gap: 24px; flex-wrap: wrap"}));
  var low = Infinity, high = 0;
  data.ranks.forEach(function (r) { low = Math.min(low, r.live_bytes); high = Math.max(high, r.live_bytes); });
  var bins = Math.max(1, Math.min(40, data.ranks.length)), counts = [], outliers = [];
  for (var b = 0; b < bins; b++) { counts.push(0); outliers.push(0); }
  function binOf(v) { return high > low ? Math.min(bins - 1, Math.floor((v - low) / (high - low) * bins)) : 0; }
  data.ranks.forEach(function (r) { var k = binOf(r.live_bytes); counts[k]++; if (r.verdict === "diverges") outliers[k]++; });
  var box = row.appendChild(element("div", {"style": "flex: 1; min-width: 320px"}));
  var histogram = box.appendChild(element("div", {"class": "histogram", "id": "histogram",
                                                 "data-bins": String(bins)}));
  var most = Math.max.apply(null, counts);
  counts.forEach(function (c, k) {
    var from = low + (high - low) * k / bins, to = low + (high - low) * (k + 1) / bins;
    var column = histogram.appendChild(element("div", {"class": outliers[k] ? "outlier" : "",
        "data-count": String(c), "title": c + " ranks, " + bytes(from) + " to " + bytes(to)}));
    column.style.alignSelf = "flex-end";
    column.style.height = (c ? Math.max(4, Math.round(90 * Math.sqrt(c / most))) : 0) + "px";
  });
  box.appendChild(element("div", {"class": "note"}, bytes(low) + " to " + bytes(high) +
      " of device memory per rank (height: the square root of the ranks in each bin; red: a divergent rank)"));
  var locals = 0, hostNames = Object.keys(hosts).sort();
  data.ranks.forEach(function (r) { locals = Math.max(locals, (r.local_rank === null ? 0 : r.local_rank) + 1); });
  box = row.appendChild(element("div", {"style": "max-height: 260px; overflow: auto"}));
  var heat = box.appendChild(element("div", {"class": "heat", "id": "heatmap", "data-hosts": String(hostNames.length),
                                             "data-local-ranks": String(locals)}));
  heat.style.gridTemplateColumns = "max-content repeat(" + locals + ", 12px)";
  var cells = {};
  data.ranks.forEach(function (r) { cells[(r.host || "?") + "/" + (r.local_rank === null ? 0 : r.local_rank)] = r; });
  hostNames.forEach(function (h) {
    heat.appendChild(element("span", {"style": "padding-right: 4px"}, h));
    for (var l = 0; l < locals; l++) {
      var r = cells[h + "/" + l];
      var cell = heat.appendChild(element("span", r ? {"data-rank": String(r.rank), "title":
          "rank " + r.rank + " on " + h + ", local rank " + l + ": " + bytes(r.live_bytes)} : {"class": "missing", "title": h + ", local rank " + l + ": no report"}));
      if (r) {
        var t = high > low ? (r.live_bytes - low) / (high - low) : 0;
        cell.style.background = r.verdict === "diverges" ? "#c62828" : "hsl(210, 70%, " + Math.round(85 - 45 * t) + "%)";
      }
    }
  });

  // Stacks.
  section = main.appendChild(element("section"));
  section.appendChild(element("h2", {}, "Stacks by how much their bytes differ between ranks"));
  var table = section.appendChild(element("table", {"id": "stacks"}));
  var head = table.appendChild(element("tr"));
  ["#", "between ranks", "in all", "the usual ranks", "outliers", "stack (innermost first)"].forEach(function (h) {
    head.appendChild(element("th", {}, h));
  });
  data.stacks.forEach(function (s, i) {
    var row = table.appendChild(element("tr", {"id": "stack-" + (i + 1)}));
    row.appendChild(element("td", {"class": "num"}, String(i + 1)));
    row.appendChild(element("td", {"class": "num"}, bytes(s.spread_bytes)));
    row.appendChild(element("td", {"class": "num"}, bytes(s.total_bytes) + (s.label ? " [" + s.label + "]" : "")));
    row.appendChild(element("td", {"class": "num"}, distribution(s.usual.ranks, s.usual.median_bytes, s.usual.mad_bytes)));
    row.appendChild(element("td", {"class": "outliers"}, s.outliers.map(function (o) {
      return "rank " + o.rank + " " + bytes(o.bytes) + (o.held_by ? " (held by " + o.held_by + ")" : "");
    }).join("; ")));
    var frames = row.appendChild(element("td", {"class": "stack"}));
    var details = frames.appendChild(element("details"));
    details.appendChild(element("summary", {}, s.site));
    details.appendChild(element("pre", {}, s.frames.map(frameText).join("\n")));
  });

  // Growing sites.
  section = main.appendChild(element("section"));
  section.appendChild(element("h2", {}, "Growing (leak suspects), by site"));
  table = section.appendChild(element("table", {"id": "growing"}));
  head = table.appendChild(element("tr"));
  ["ranks", "fastest", "site"].forEach(function (h) { head.appendChild(element("th", {}, h)); });
  data.growing.forEach(function (g) {
    var row = table.appendChild(element("tr"));
    row.appendChild(element("td", {"class": "num"}, String(g.growth.ranks)));
    row.appendChild(element("td", {}, g.growth.fastest.slice(0, 3).map(function (f) {
      /* per call where the ranks mark no steps (none in merges of earlier versions) */
      var call = g.growth.per === "second" && f.rate_per_call >= 1 ? " +" + bytes(f.rate_per_call) + " a call," : "";
      return "rank " + f.rank + call + " +" + bytes(f.rate) + " per " + g.growth.per + ", " + bytes(f.bytes); }).join("; ")));
    var frames = row.appendChild(element("td", {"class": "stack"}));
    var details = frames.appendChild(element("details"));
    details.appendChild(element("summary", {}, g.site));
    details.appendChild(element("pre", {}, g.frames.map(frameText).join("\n")));
  });
  if (!data.growing.length) table.appendChild(element("tr")).appendChild(element("td", {"colspan": "3"}, "none"));

  // Every rank, collapsed.
  section = main.appendChild(element("section"));
  var all = section.appendChild(element("details", {"id": "all-ranks"}));
  all.appendChild(element("summary", {}, "Every rank (" + data.ranks.length + ")"));
  var largest = 0;
  data.ranks.forEach(function (r) { largest = Math.max(largest, r.peak_bytes, r.live_bytes); });
  table = all.appendChild(element("table", {"id": "ranks"}));
  head = table.appendChild(element("tr"));
  ["rank", "host", "local rank", "devices", "at", "memory", "", "peak", "leaked", "file"].forEach(function (h) {
    head.appendChild(element("th", {}, h));
  });
  data.ranks.forEach(function (r) {
    var divergent = r.verdict === "diverges";
    var row = table.appendChild(element("tr", {"data-rank": String(r.rank), "data-live": String(r.live_bytes)}));
    row.appendChild(element("td", {"class": "num"}, String(r.rank)));
    row.appendChild(element("td", {}, r.host || "?"));
    row.appendChild(element("td", {"class": "num"}, r.local_rank === null ? "-" : String(r.local_rank)));
    row.appendChild(element("td", {}, r.devices.join(",")));
    row.appendChild(element("td", {}, r.at === "end" ? "end" : r.reason));
    row.appendChild(element("td", {"class": "num"}, bytes(r.live_bytes)));
    var cell = row.appendChild(element("td", {"class": "barcell"}));
    cell.appendChild(bar(r.live_bytes, largest, divergent ? "#c62828" : "#1e88e5"));
    row.appendChild(element("td", {"class": "num"}, bytes(r.peak_bytes)));
    row.appendChild(element("td", {"class": "num"}, r.leaked_bytes === null ? "-" : bytes(r.leaked_bytes)));
    row.appendChild(element("td", {"class": "stack"}, r.file));
  });
  all.appendChild(element("p", {"class": "note"},
      "memory and peak: device memory, summed over the rank's devices; memory at the moment in \"at\": " +
      "end, when a Python program ended (its exit hooks), before the interpreter's teardown freed what " +
      "globals held; else when the report was written. leaked: live at exit and not held at the end, every kind"));
  document.body.setAttribute("data-rendered", "1");
})();
