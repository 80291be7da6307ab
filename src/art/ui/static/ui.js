// art ui: token tooltips, the colour switch, and live refresh. No framework, no build step.
(function () {
  "use strict";
  var tip = document.getElementById("tip");
  function fmt(v) { return v === undefined || v === "" || v === "—" ? "—" : v; }

  // Hover a token: its sampled logprob, the trainer's logprob, the ratio, whether it was trained.
  document.addEventListener("mouseover", function (ev) {
    var t = ev.target;
    if (!t.classList || !t.classList.contains("tok")) { tip.hidden = true; return; }
    var d = t.dataset, lines = ["token " + JSON.stringify(t.textContent.replace("↵\n", "\n")),
      "sampled logprob  " + fmt(d.s)];
    if (d.m !== undefined) {
      lines.push("trainer logprob  " + fmt(d.t), "ratio            " + fmt(d.r),
                 "trained          " + (d.m === "1" ? "yes" : "no (masked)"));
    } else { lines.push("(no trainer record for this turn)"); }
    if (d.a !== undefined) lines.push("advantage        " + d.a);
    tip.textContent = lines.join("\n");
    tip.hidden = false;
  });
  document.addEventListener("mousemove", function (ev) {
    if (!tip.hidden) { tip.style.left = (ev.clientX + 14) + "px"; tip.style.top = (ev.clientY + 14) + "px"; }
  });

  // Colour tokens by advantage (as rendered), importance ratio, or sampled logprob.
  function colour(mode) {
    var toks = document.querySelectorAll(".tok");
    for (var i = 0; i < toks.length; i++) {
      var t = toks[i], d = t.dataset;
      if (!t.dataset.base) t.dataset.base = t.style.background || "transparent";
      var bg = t.dataset.base;
      if (mode === "ratio" && d.r && d.r !== "—") {
        var lr = Math.abs(Math.log(parseFloat(d.r)));
        bg = "rgba(130,60,200," + Math.min(0.12 + lr * 2, 0.85).toFixed(2) + ")";
      } else if (mode === "logprob" && d.s && d.s !== "—") {
        var p = Math.exp(parseFloat(d.s));
        bg = "rgba(240,140,0," + Math.min(0.08 + (1 - p) * 0.8, 0.88).toFixed(2) + ")";
      } else if (mode !== "advantage") { bg = "transparent"; }
      t.style.background = bg;
    }
  }
  function bindColour() {
    var select = document.getElementById("colour-by");
    if (!select) return;
    var saved = localStorage.getItem("art-ui-colour") || "advantage";
    select.value = saved;
    colour(saved);
    select.onchange = function () { localStorage.setItem("art-ui-colour", select.value); colour(select.value); };
  }
  bindColour();

  // Live updates: poll the record's version; when it changes, fetch this page again and swap <main>.
  var poll = document.body.dataset.poll, live = document.getElementById("live"), current = null;
  function check() {
    fetch(poll, { credentials: "same-origin", cache: "no-store" }).then(function (r) { return r.json(); })
      .then(function (j) {
        if (current === null) { current = j.version; live.textContent = "● live"; return; }
        if (j.version === current) return;
        current = j.version;
        return fetch(location.href, { credentials: "same-origin", cache: "no-store" }).then(function (r) { return r.text(); })
          .then(function (html) {
            var doc = new DOMParser().parseFromString(html, "text/html"), main = doc.querySelector("main");
            var open = Array.prototype.map.call(document.querySelectorAll("details[open]"), function (d) { return d.querySelector("summary") && d.querySelector("summary").textContent; });
            if (!main) return;
            document.querySelector("main").innerHTML = main.innerHTML;
            document.querySelectorAll("details").forEach(function (d) {
              var s = d.querySelector("summary");
              if (s && open.indexOf(s.textContent) >= 0) d.open = true;
            });
            bindColour();
            live.textContent = "● updated " + new Date().toLocaleTimeString();
          });
      }).catch(function () { live.textContent = "○ not reachable"; });
  }
  if (poll) { check(); setInterval(check, parseInt(document.body.dataset.interval || "2000", 10)); }
})();
