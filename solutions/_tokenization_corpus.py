"""The small corpus of exercise 15: plain sentences about vessels, sensors, payments, units and identifiers.

Written for the kit and shipped with it (no download, no licence to check):
about 4 KB of text, one sentence a line, so byte-pair encoding can be trained
on it in pure Python in well under a second. Common words ("the", "vessel",
"sensor", "payment") come back again and again; product identifiers and
measured values are many and each is rare, which is what the exercise
measures. ``CORPUS`` is the text; ``SENTENCES`` its lines.
"""

from __future__ import annotations

CORPUS = """\
The vessel left the harbour at dawn and the sensor on the bow reported calm water.
The pilot checked the engine temperature before the vessel entered the channel.
A sensor on the hull measured the water temperature every ten minutes.
The payment for the fuel was sent to the port authority in the morning.
The harbour master asked the vessel to wait until the tide was high.
Every sensor sends its reading to the control room once a minute.
The control room stores each reading with the time, the sensor and the unit.
The vessel changed course because the radar detected a small boat ahead.
The customer paid the invoice for the sensor and the payment was confirmed.
The sensor reported a water level of 2.4 m at the north gate of the harbour.
The oxygen sensor measured 7.8 mg/L in the water near the pier.
The flow sensor on the pump reported 140 L/min during the test.
The engine of the vessel ran at 1800 rpm while the vessel crossed the bay.
A payment of 250 euros was refused because the card had expired.
The customer asked for a refund and the payment was returned the next day.
The invoice listed the sensor, the cable, the battery and the mounting frame.
The order for part RT-4410-A was shipped with the invoice for the pump.
The technician replaced the pressure sensor with part PS-2087-C on the vessel.
The vessel carried two hundred containers from the north port to the south port.
The crew checked every container and the sensor on each door before the vessel left.
The temperature in the cold room was 4.5 C and the sensor raised no alarm.
The sensor raised an alarm when the temperature rose above 8 C in the cold room.
The operator read the alarm, called the crew and the crew closed the door.
The bank sent a message that the payment to the shipping company was late.
The shipping company sent a new invoice and the customer paid it the same day.
The port charged a fee for each hour the vessel stayed at the pier.
The pressure in the tank was 3.2 bar and the valve stayed closed.
A wind sensor on the mast measured gusts of 18 m/s in the afternoon.
The vessel slowed down because the wind sensor reported strong gusts.
The radar, the wind sensor and the depth sensor all send data to the bridge.
The depth sensor reported 12 m of water under the keel in the channel.
The account was charged twice, so the customer asked the bank to cancel one payment.
The bank cancelled the second payment and sent a message to the customer.
The battery of the sensor was low, so the technician changed it on Monday.
The new battery for the sensor arrived with order number 55-1092 from the supplier.
The supplier sent the cable in a box marked with the code CB-7731-D.
The crew loaded fuel, water and food before the vessel left the port.
The fuel sensor reported that the tank was half full when the vessel arrived.
The vessel arrived at the south port in the evening and the crew went ashore.
The payment for the pilot and the tug was made by the shipping company.
Each sensor has a serial number, a unit and a place on the vessel.
The salinity sensor in the bay measured 35 g/L, the same as the day before.
The turbidity of the water rose after the storm and the sensor sent a warning.
The control room sent the warning to the vessel and the vessel changed course.
A payment of 1200 euros for the repair was approved by the manager.
The manager approved the payment after the technician sent the report.
The report said that the sensor, the cable and the pump were in good order.
The vessel waited at anchor while the storm passed over the harbour.
The sensor on the anchor chain measured a load of 40 kN during the storm.
After the storm the crew checked the hull, the sensor and the engine again.
"""

SENTENCES: tuple[str, ...] = tuple(CORPUS.splitlines())
