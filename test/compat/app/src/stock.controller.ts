import { Controller, Param, ParseIntPipe, Post, Query } from '@nestjs/common';
import { StockService, type Taken } from './stock.service.js';

@Controller('stock')
export class StockController {
  constructor(private readonly stock: StockService) {}

  @Post(':sku/restock')
  restock(@Param('sku') sku: string, @Query('count', ParseIntPipe) count: number) {
    return this.stock.restock(sku, count);
  }

  @Post(':sku/take')
  take(@Param('sku') sku: string): Promise<Taken> {
    return this.stock.take(sku);
  }
}
