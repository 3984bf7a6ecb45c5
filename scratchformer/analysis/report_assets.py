"""The CSS and JavaScript inlined into ``index.html`` (:mod:`~scratchformer.analysis.report`), as strings so that they
travel with the package."""

REPORT_CSS = """
:root { --cell: 26px; --ink: #1d1d1f; --muted: #5f6368; --line: #d9d9de; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); margin: 0;
       background: #fafafa; }
header, main, footer { max-width: 1500px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 16px; }
h1 { font-size: 24px; margin: 8px 0; } h2 { margin-top: 32px; border-bottom: 1px solid var(--line); }
h3 { margin: 4px 0 8px; font-size: 17px; }
.sentences li { margin: 2px 0; } .sense { display: inline-block; min-width: 60px; color: var(--muted); }
.verdicts { list-style: none; padding: 0; } .verdicts li { margin: 4px 0; }
.verdict { font-weight: 600; padding: 2px 8px; border-radius: 4px; }
.verdict.yes { background: #e3f4e8; color: #17652f; } .verdict.no { background: #fdecea; color: #9b1c12; }
.verdict.na { background: #eee; }
.note, .stack-note { color: #7a1f00; font-size: 14px; min-height: 1.5em; margin: 4px 0; }
.models { display: flex; flex-wrap: wrap; gap: 24px; }
.model { flex: 1 1 560px; background: white; border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; }
table { border-collapse: collapse; margin: 10px 0; font-size: 13px; width: 100%; }
caption { text-align: left; color: var(--muted); font-size: 13px; padding-bottom: 4px; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 8px; text-align: left; }
th { background: #f1f1f4; }
.attention-views { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
.attention-view { background: white; border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px;
                  overflow-x: auto; }
.controls label { margin-right: 14px; font-size: 14px; } .controls select { font-size: 14px; }
.attention-grid { display: grid; gap: 1px; margin-top: 6px; }
.attention-grid .cell { width: var(--cell); height: var(--cell); }
.attention-grid .word-start-col { box-shadow: -1px 0 0 #2a9d8f; }
.attention-grid .word-start-row { box-shadow: 0 -1px 0 #2a9d8f; }
.attention-grid .word-start-col.word-start-row { box-shadow: -1px 0 0 #2a9d8f, 0 -1px 0 #2a9d8f; }
.key-label { writing-mode: vertical-rl; transform: rotate(180deg); text-align: left; font-size: 13px;
             padding: 4px 0; align-self: end; justify-self: center; white-space: nowrap; }
.query-label { font-size: 13px; padding-right: 6px; align-self: center; justify-self: end; white-space: nowrap; }
.corner { font-size: 11px; color: var(--muted); align-self: end; justify-self: end; padding: 0 6px 4px 0;
          text-align: right; }
.legend { width: 420px; margin: 8px 0 16px; }
.legend-bar { height: 14px; border: 1px solid var(--line); }
.legend-ticks { position: relative; height: 18px; font-size: 12px; }
.legend-ticks span { position: absolute; transform: translateX(-50%); }
.legend-label { font-size: 12px; color: var(--muted); }
figure { margin: 20px 0; background: white; border: 1px solid var(--line); border-radius: 8px; padding: 12px;
         overflow-x: auto; }
figure img { max-width: 100%; cursor: zoom-in; display: block; }
figure img.zoomed { max-width: none; cursor: zoom-out; }
figcaption { color: var(--muted); font-size: 14px; margin-top: 6px; } .hint { font-size: 12px; }
footer { color: var(--muted); font-size: 13px; padding: 24px; }
"""

ATTENTION_JS = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("attention-data").textContent);
  var stops = data.colormap;  // RGB samples of the colour map at evenly spaced values of weight ** gamma

  // The colour of an attention weight: the colour map at weight ** gamma (a square-root scale), interpolated.
  function colour(weight) {
    var t = Math.pow(Math.min(Math.max(weight, 0), 1), data.gamma) * (stops.length - 1);
    var i = Math.min(Math.floor(t), stops.length - 2), f = t - i;
    var rgb = [0, 1, 2].map(function (c) { return Math.round(stops[i][c] + f * (stops[i + 1][c] - stops[i][c])); });
    return "rgb(" + rgb.join(",") + ")";
  }

  function add(parent, className, text, row, column) {
    var el = document.createElement("div");
    el.className = className;
    if (text !== undefined) el.textContent = text;
    el.style.gridRow = row;
    el.style.gridColumn = column;
    parent.appendChild(el);
    return el;
  }

  function option(select, value, text) {
    var el = document.createElement("option");
    el.value = value;
    el.textContent = text;
    select.appendChild(el);
  }

  // token index -> the word it belongs to, and the tokens where a word of several tokens starts or ends
  function words(groups, length) {
    var word = new Array(length), edges = {};
    groups.forEach(function (g) {
      if (g[2] - g[1] > 1) { edges[g[1]] = true; edges[g[2]] = true; }
      for (var i = g[1]; i < g[2]; i++) word[i] = g[0];
    });
    return { word: word, edges: edges };
  }

  function draw(view, stack, matrix) {
    var grid = view.querySelector(".attention-grid");
    var nq = stack.query_tokens.length, nk = stack.key_tokens.length;
    var q = words(stack.query_groups, nq), k = words(stack.key_groups, nk);
    grid.textContent = "";
    grid.style.gridTemplateColumns = "max-content repeat(" + nk + ", var(--cell))";
    grid.style.gridTemplateRows = "max-content repeat(" + nq + ", var(--cell))";
    add(grid, "corner", "query \u2193  key \u2192", "1", "1");
    stack.key_groups.forEach(function (g) {
      add(grid, "key-label", g[0], "1", (g[1] + 2) + " / span " + (g[2] - g[1]));
    });
    stack.query_groups.forEach(function (g) {
      add(grid, "query-label", g[0], (g[1] + 2) + " / span " + (g[2] - g[1]), "1");
    });
    for (var r = 0; r < nq; r++) {
      for (var c = 0; c < nk; c++) {
        var cls = "cell" + (c > 0 && k.edges[c] ? " word-start-col" : "") + (r > 0 && q.edges[r] ? " word-start-row" : "");
        var cell = add(grid, cls, undefined, String(r + 2), String(c + 2));
        cell.style.background = colour(matrix[r][c]);
        cell.title = "query " + q.word[r] + " (token " + stack.query_tokens[r] + ") \u2192 key " + k.word[c] +
          " (token " + stack.key_tokens[c] + "): " + matrix[r][c].toFixed(3);
      }
    }
  }

  function setup(view) {
    var model = data.models[Number(view.dataset.model)];
    var stackSelect = view.querySelector("select.stack");
    var layerSelect = view.querySelector("select.layer");
    var headSelect = view.querySelector("select.head");
    model.stacks.forEach(function (s, i) { option(stackSelect, i, s.title); });

    function fillLayersAndHeads() {
      var stack = model.stacks[Number(stackSelect.value)];
      var layer = Math.min(Number(layerSelect.value || 0), stack.layers - 1);
      var head = headSelect.value || "mean";
      layerSelect.textContent = "";
      headSelect.textContent = "";
      for (var l = 0; l < stack.layers; l++) option(layerSelect, l, String(l + 1) + " of " + stack.layers);
      option(headSelect, "mean", "mean of " + stack.heads + " heads");
      for (var h = 0; h < stack.heads; h++) option(headSelect, h, String(h + 1));
      layerSelect.value = String(layer);
      headSelect.value = head === "mean" || Number(head) >= stack.heads ? "mean" : head;
    }

    function render() {
      var stack = model.stacks[Number(stackSelect.value)];
      var layer = Number(layerSelect.value);
      var matrix = headSelect.value === "mean" ? stack.mean[layer] : stack.per_head[layer][Number(headSelect.value)];
      view.dataset.stack = stack.key;
      view.dataset.layer = String(layer + 1);
      view.dataset.head = headSelect.value;
      view.querySelector(".stack-note").textContent = stack.note;
      draw(view, stack, matrix);
    }

    stackSelect.addEventListener("change", function () { fillLayersAndHeads(); render(); });
    layerSelect.addEventListener("change", render);
    headSelect.addEventListener("change", render);
    fillLayersAndHeads();
    render();
  }

  document.querySelectorAll(".attention-view").forEach(setup);
  document.querySelectorAll(".legend-bar").forEach(function (bar) {
    bar.style.background = "linear-gradient(to right, " + stops.map(function (s) {
      return "rgb(" + s.join(",") + ")";
    }).join(", ") + ")";
  });
  document.querySelectorAll("img.zoomable").forEach(function (img) {
    img.addEventListener("click", function () { img.classList.toggle("zoomed"); });
  });
})();
"""
