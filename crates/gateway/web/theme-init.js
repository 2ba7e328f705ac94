// Runs before the first paint so a saved theme does not flash the other one.
(function () {
  var saved = null;
  try { saved = localStorage.getItem("nanocrab.theme"); } catch (e) { /* storage may be blocked */ }
  if (saved !== "light" && saved !== "dark") return;
  document.documentElement.setAttribute("data-theme", saved);
  var light = document.getElementById("hljs-light");
  var dark = document.getElementById("hljs-dark");
  if (light) light.media = saved === "light" ? "all" : "not all";
  if (dark) dark.media = saved === "dark" ? "all" : "not all";
})();
