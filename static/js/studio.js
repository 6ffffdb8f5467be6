// Keyboard navigation between agent steps on the trajectory page: j = next, k = previous.
// Plain links (#m12) work without this script; it only adds the keys and a highlight.
(function () {
  function steps() { return Array.from(document.querySelectorAll("article.msg.step")); }
  function current() { return document.querySelector("article.msg.step.current"); }
  function go(el) {
    if (!el) return;
    document.querySelectorAll(".current").forEach(function (c) { c.classList.remove("current"); });
    el.classList.add("current");
    var link = document.querySelector('[data-step-link="' + el.dataset.step + '"]');
    if (link) link.classList.add("current");
    el.scrollIntoView({ block: "center" });
    history.replaceState(null, "", "#" + el.id);
  }
  document.addEventListener("keydown", function (e) {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
    var t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    if (e.key !== "j" && e.key !== "k") return;
    var all = steps();
    if (!all.length) return;
    var i = all.indexOf(current());
    if (i < 0 && location.hash) {
      var fromHash = document.getElementById(location.hash.slice(1));
      i = all.indexOf(fromHash);
    }
    var next = e.key === "j" ? Math.min(i + 1, all.length - 1) : Math.max(i - 1, 0);
    if (i < 0) next = 0;
    go(all[next]);
    e.preventDefault();
  });
})();

// The annotation editor answers a stale save with 409 (the conflict view) and bad input with 400
// (the errors): both are pages to show in place, not failures to drop.
document.addEventListener("htmx:beforeSwap", function (e) {
  var status = e.detail.xhr.status;
  if (status === 409 || status === 400) { e.detail.shouldSwap = true; e.detail.isError = false; }
});
