/* merge_html.js - draws `cumemtrace merge --format html`: the merged view
 * (cumemtrace-merge JSON, embedded in #merge-data) as a table of ranks with
 * bars, the divergent rank and the rule, and the stacks that hold most across
 * ranks with bytes per rank. Compiled into the command by scripts/embed.cmake.
 * Script errors are counted on <body data-script-errors> for the tests. */
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
    return (i ? n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0) : String(n)) + " " + units[i];
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

  var data = JSON.parse(document.getElementById("merge-data").textContent);
  var app = document.getElementById("app");
  app.textContent = "";
  var header = element("header");
  header.appendChild(element("h1", {}, "cumemtrace merge: " + data.ranks.length + " ranks"));
  header.appendChild(element("div", {"class": "meta"},
      "ranks from " + (data.ranks_from === "reports" ? "the reports' RANK" : "the order of the files")));
  app.appendChild(header);
  var main = app.appendChild(element("main"));

  var section = main.appendChild(element("section"));
  section.appendChild(element("h2", {}, "Per rank"));
  var largest = 0;
  data.ranks.forEach(function (r) { largest = Math.max(largest, r.peak_bytes, r.live_bytes); });
  var table = section.appendChild(element("table", {"id": "ranks"}));
  var head = table.appendChild(element("tr"));
  ["rank", "host", "devices", "at", "memory", "", "peak", "leaked", "file"].forEach(function (h) {
    head.appendChild(element("th", {}, h));
  });
  data.ranks.forEach(function (r) {
    var divergent = data.divergent && data.divergent.rank === r.rank;
    var row = table.appendChild(element("tr", {"data-rank": String(r.rank),
                                              "data-live": String(r.live_bytes)}));
    row.appendChild(element("td", {"class": "num"}, String(r.rank)));
    row.appendChild(element("td", {}, r.host || "?"));
    row.appendChild(element("td", {}, r.devices.join(",")));
    row.appendChild(element("td", {}, r.at === "end" ? "end" : r.reason));
    row.appendChild(element("td", {"class": "num"}, bytes(r.live_bytes)));
    var cell = row.appendChild(element("td", {"class": "barcell"}));
    cell.appendChild(bar(r.live_bytes, largest, divergent ? "#c62828" : "#1e88e5"));
    row.appendChild(element("td", {"class": "num"}, bytes(r.peak_bytes)));
    row.appendChild(element("td", {"class": "num"}, r.leaked_bytes === null ? "-" : bytes(r.leaked_bytes)));
    row.appendChild(element("td", {"class": "stack"}, r.file));
  });
  section.appendChild(element("p", {"class": "note"},
      "memory and peak: device memory, summed over the rank's devices; memory at the moment in \"at\": " +
      "end, when a Python program ended (its exit hooks), before the interpreter's teardown freed what " +
      "globals held; else when the report was written. leaked: live at exit and not held at the end, every kind"));

  section = main.appendChild(element("section"));
  section.appendChild(element("h2", {}, "Divergent rank"));
  var verdict = data.divergent
      ? "rank " + data.divergent.rank + " holds " + bytes(data.divergent.live_bytes) +
        (data.ranks.some(function (r) { return r.rank === data.divergent.rank && r.at === "end"; })
             ? " at its program's end" : " live") + ", against a median of " + bytes(data.divergent.median_of_others) + " on the others"
      : "none";
  section.appendChild(element("p", {"id": "divergent", "class": data.divergent ? "verdict-bad" : "verdict-none",
                                    "data-value": data.divergent ? String(data.divergent.rank) : "none"}, verdict));
  section.appendChild(element("p", {"class": "note"}, "rule: " + data.rule));

  section = main.appendChild(element("section"));
  section.appendChild(element("h2", {}, "Stacks by how much their bytes differ between ranks"));
  table = section.appendChild(element("table", {"id": "stacks"}));
  head = table.appendChild(element("tr"));
  ["#", "between ranks", "in all"].concat(data.ranks.map(function (r) { return "rank " + r.rank; }))
      .concat(["stack (innermost first)"]).forEach(function (h) { head.appendChild(element("th", {}, h)); });
  var top = 0;
  data.stacks.forEach(function (s) { s.bytes_by_rank.forEach(function (b) { top = Math.max(top, b); }); });
  data.stacks.forEach(function (s, i) {
    var row = table.appendChild(element("tr"));
    row.appendChild(element("td", {"class": "num"}, String(i + 1)));
    row.appendChild(element("td", {"class": "num"}, bytes(s.spread_bytes)));
    row.appendChild(element("td", {"class": "num"}, bytes(s.total_bytes) + (s.label ? " [" + s.label + "]" : "")));
    s.bytes_by_rank.forEach(function (b) {
      var cell = row.appendChild(element("td", {"class": "num"}, bytes(b)));
      cell.appendChild(bar(b, top, "#90a4ae"));
    });
    var frames = row.appendChild(element("td", {"class": "stack"}));
    var details = frames.appendChild(element("details"));
    details.appendChild(element("summary", {}, s.frames.length ? frameText(s.frames[0]) : "(no stack)"));
    details.appendChild(element("pre", {}, s.frames.map(frameText).join("\n")));
  });

  section = main.appendChild(element("section"));
  section.appendChild(element("h2", {}, "Growing (leak suspects), per rank"));
  table = section.appendChild(element("table", {"id": "growing"}));
  head = table.appendChild(element("tr"));
  ["rank", "rate", "bytes", "site"].forEach(function (h) { head.appendChild(element("th", {}, h)); });
  data.ranks.forEach(function (r) {
    var list = r.growing || [];
    if (!list.length) {
      var row = table.appendChild(element("tr"));
      row.appendChild(element("td", {"class": "num"}, String(r.rank)));
      row.appendChild(element("td", {"colspan": "3"}, r.growing === null ? "not known (a crash dump)" : "none"));
    }
    list.forEach(function (g) {
      var row = table.appendChild(element("tr"));
      row.appendChild(element("td", {"class": "num"}, String(r.rank)));
      row.appendChild(element("td", {"class": "num"}, "+" + bytes(g.rate) + " per " + g.per));
      row.appendChild(element("td", {"class": "num"}, bytes(g.bytes)));
      var frames = row.appendChild(element("td", {"class": "stack"}));
      var details = frames.appendChild(element("details"));
      details.appendChild(element("summary", {}, g.frames.length ? frameText(g.frames[0]) : "(no stack)"));
      details.appendChild(element("pre", {}, g.frames.map(frameText).join("\n")));
    });
  });
  document.body.setAttribute("data-rendered", "1");
})();
