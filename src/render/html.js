// acp-journal HTML export: buttons, and a self-check for the browser test.
(function () {
  "use strict";
  var tools = function () { return document.querySelectorAll("details.tool"); };
  var on = function (id, f) { var b = document.getElementById(id); if (b) { b.addEventListener("click", f); } };
  on("expand-tools", function () { tools().forEach(function (d) { d.open = true; }); });
  on("collapse-tools", function () { tools().forEach(function (d) { d.open = false; }); });
  on("toggle-thoughts", function (e) {
    var hidden = document.body.classList.toggle("hide-thoughts");
    e.target.textContent = hidden ? "Show thoughts" : "Hide thoughts";
  });
  // With #selftest in the URL: click the first tool call's summary like a user would, and
  // write what happened into the page, where a headless browser's DOM dump shows it.
  if (location.hash === "#selftest") {
    var report = { turns: document.querySelectorAll("section.turn").length, tool: null };
    var summary = document.querySelector("details.tool > summary");
    if (summary) {
      summary.click();
      var details = summary.parentElement;
      var body = details.querySelector(".body");
      report.tool = {
        id: details.getAttribute("data-tool"),
        open: details.open,
        bodyHeight: body ? body.getBoundingClientRect().height : 0,
        bodyText: body ? body.textContent.slice(0, 200) : ""
      };
    }
    var out = document.createElement("pre");
    out.id = "selftest";
    out.textContent = JSON.stringify(report);
    document.body.appendChild(out);
  }
})();
