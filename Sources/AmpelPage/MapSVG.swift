import AmpelCore
import AmpelDomain

/// The map of the region: one `<path>` per district with its AGS, phase and fill.
///
/// Each path carries `data-ags`, `data-phase` and `fill` (the rule set's colour, or the
/// no-data grey), so the page's script and the browser test read the same attributes the
/// server wrote. Stale data is hatched over the whole map.
public enum MapSVG {
    /// The fill of a district the data does not know (neither a phase nor outside).
    public static let noDataFill = "#C8CDD2"

    /// The fill the map gives `status`.
    public static func fill(_ status: DistrictStatus?) -> String {
        status?.color?.hex ?? noDataFill
    }

    public static func render(shapes: MapShapes, districts: [String: DistrictStatus], data: PageDataStatus, text: PageText) -> String {
        var svg = ""
        svg.reserveCapacity(shapes.shapes.reduce(0) { $0 + $1.path.utf8.count } + shapes.shapes.count * 300 + 1024)
        let height = MapShapes.decimal(tenths: Int(shapes.height * 10))
        svg += #"<svg id="map" class="map\#(data.stale ? " stale" : "")" viewBox="0 0 1000 \#(height)" role="img" aria-label="\#(htmlEscaped(text.mapLabel))" xmlns="http://www.w3.org/2000/svg">"#
        svg += #"<defs><pattern id="hatch" width="14" height="14" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="5" height="14" class="hatch-stroke"/></pattern><clipPath id="region">"#
        for shape in shapes.shapes { svg += ##"<use href="#d\##(shape.ags)"/>"## }
        svg += "</clipPath></defs><g class=\"districts\">"
        // The data as the header's badge names it (`Snapshot · 2020-10-15`, `Live · … (stale)`).
        let dataLine = "\n" + text.dataDate + ": " + text.badge(data).text
        for shape in shapes.shapes {
            let status = districts[shape.ags]
            let name = status?.name ?? shape.name
            let phase = status?.phase ?? .noData
            var tooltip = name + "\n" + text.incidence + ": " + text.incidence(status?.incidence)
            tooltip += "\n" + text.phase + ": " + text.phaseName(phase)
            tooltip += dataLine
            svg += #"<path id="d\#(shape.ags)" class="district" data-ags="\#(shape.ags)" data-name="\#(htmlEscaped(name))" data-phase="\#(phase.id)""#
            if let incidence = status?.incidence, incidence.isFinite { svg += #" data-incidence="\#(incidence)""# }
            svg += #" fill="\#(fill(status))" d="\#(shape.path)"><title>\#(htmlEscaped(tooltip))</title></path>"#
        }
        svg += #"</g><rect class="stale-hatch" width="1000" height="\#(height)" fill="url(#hatch)" clip-path="url(#region)"/></svg>"#
        return svg
    }
}
